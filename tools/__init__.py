"""Tools for working on lab, not part of the package: the generators of the documentation."""
