"""The lab model: what a lab is (a LabSpec), with no notion of how it is realised."""
