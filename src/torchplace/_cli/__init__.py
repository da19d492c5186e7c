"""One module per ``torchplace`` subcommand; registered in ``torchplace.cli``."""
