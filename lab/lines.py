"""Whole lines out of a process's stdout and stderr, mended where a log tailer cut one.

torchrun --tee copies each worker's output from a file to its own stdout/stderr, one line at a time, each behind a
tag ("[rank2]:", or "[default0]:" by torch's default template). Its tailer reads up to the end of the file: when a
worker's write is only partly in the file yet (a write across a page boundary), it prints the tag and the part, and
later the tag again and the rest. The stream then carries "[rank2]:ERR[rank3]:...\n" and, further on,
"[rank2]: rank=2 i=5\n". LineAssembler keeps each stream apart and each tag's unfinished text until its rest comes,
so every line reads as the worker printed it: "[rank2]:ERR rank=2 i=5".
"""

from __future__ import annotations

import os
import re
import selectors
from typing import IO, Iterator

STDOUT, STDERR = 1, 2

# The tag a tailer puts before each piece it copies (torchrun --tee): the lab's template, or torch's default.
TAIL_TAG = re.compile(r"\[(?:rank|default)\d+\]:")


class LineAssembler:
    """Bytes from several streams in, whole text lines out; a tag's cut-off text waits for the tag's next piece."""

    def __init__(self):
        self.buffers: dict[int, bytes] = {}
        self.unfinished: dict[tuple[int, str], str] = {}  # (stream, tag) -> text that tag's line began with

    def feed(self, stream: int, chunk: bytes) -> list[str]:
        *complete, self.buffers[stream] = (self.buffers.get(stream, b"") + chunk).split(b"\n")
        return [line for raw in complete for line in self._mend(stream, raw.decode(errors="replace").rstrip("\r"))]

    def close(self) -> list[str]:
        """What is left at the end: a last line without its newline, and any text whose rest never came."""
        rest = [line for stream, raw in self.buffers.items() if raw
                for line in self._mend(stream, raw.decode(errors="replace").rstrip("\r"))]
        self.buffers.clear()
        rest += [tag + text for (_, tag), text in self.unfinished.items() if text]
        self.unfinished.clear()
        return rest

    def _mend(self, stream: int, line: str) -> list[str]:
        pieces = _pieces(line)
        whole = []
        for position, (tag, text) in enumerate(pieces):
            text = self.unfinished.pop((stream, tag), "") + text
            if position < len(pieces) - 1:  # another tag follows on this line: this piece was cut before its end
                self.unfinished[(stream, tag)] = text
            else:
                whole.append(tag + text)
        return whole


def _pieces(line: str) -> list[tuple[str, str]]:
    """[(tag, text)]: the line split before each tag that follows text; a tag right after another ("[rank1]:[rank1]:",
    the tailer's and the worker's own) is text of the first."""
    pieces, tag, text_from = [], "", 0
    for match in TAIL_TAG.finditer(line):
        if match.start() == text_from:  # at the line's start, or stacked right after the piece's tag
            if not tag:
                tag, text_from = match.group(), match.end()
            continue
        pieces.append((tag, line[text_from:match.start()]))
        tag, text_from = match.group(), match.end()
    pieces.append((tag, line[text_from:]))
    return pieces


def pipe_lines(stdout: IO[bytes], stderr: IO[bytes] | None = None) -> Iterator[str]:
    """Whole lines from a local process's pipes as they come, each pipe its own stream."""
    assembler = LineAssembler()
    with selectors.DefaultSelector() as selector:
        for stream, pipe in ((STDOUT, stdout), (STDERR, stderr)):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ, stream)
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fd, 65536)
                if chunk:
                    yield from assembler.feed(key.data, chunk)
                else:
                    selector.unregister(key.fileobj)
    yield from assembler.close()
