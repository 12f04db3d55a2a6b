"""Multi-node tests with pytest: the plugin (plugin.py) runs a test's body on every rank across a lab's nodes and gives
tests a `lab_cluster` to run jobs on; labs.py keeps the session's labs, ranks.py and results.py read what came of it."""
