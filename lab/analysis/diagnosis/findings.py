"""A cause found, with its evidence and fix, as the CLI prints it and a run record keeps it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass
class Finding:
    cause: str  # stable id, e.g. 'master-addr-loopback'
    title: str
    evidence: str  # the quoted line (or fact) it rests on
    node: int | None
    rank: int | None
    fix: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        """A finding as a run record keeps it (extra keys such as `step` are left out)."""
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__})


def format_findings(findings: list[Finding], verbose: bool = False) -> str:
    """Plain text: the root cause (verbose: every finding), each with where, the quoted evidence and the fix."""
    if not findings:
        return "no cause found in the logs"
    blocks = []
    for finding in findings if verbose else findings[:1]:
        where = ", ".join(part for part in (
            f"node{finding.node}" if finding.node is not None else "",
            f"rank {finding.rank}" if finding.rank is not None else "") if part)
        blocks.append(f"cause: {finding.title}" + (f" ({where})" if where else "")
                      + f"\n  evidence: {finding.evidence}\n  fix: {finding.fix}")
    if not verbose and len(findings) > 1:
        blocks.append(f"({len(findings) - 1} more finding(s): show them all with --verbose)")
    return "\n".join(blocks)


def findings_json(findings: list[Finding]) -> str:
    return json.dumps([finding.to_dict() for finding in findings], indent=2)
