"""One module per subcommand; each exposes add_parser(subparsers) and run(args) -> exit code."""

COMMANDS = ("init", "check", "baseline", "compare", "bisect", "calibrate", "doctor", "merge", "report", "tune")
