"""The error types every layer raises, each bound to one exit code of the CLI contract."""

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_INFRA = 3


class PerfguardError(Exception):
    """Base class: the message is one line that names the file, key or value at fault."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(PerfguardError):
    """Bad configuration, bad file, unknown kernel or target: the user can fix it (exit 2)."""

    exit_code = EXIT_USAGE


class InfraError(PerfguardError):
    """Toolchain missing, build failed, simulator crashed, wrong kernel output (exit 3)."""

    exit_code = EXIT_INFRA
