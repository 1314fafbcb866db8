"""Bounded readers of input, at the bottom of the layers (they import only
``polang.errors``): every file a command, a test file, a configuration or a store names
is read here, so one place decides what a name may point at and how much is read."""

from polang.inputs.files import (
    MAX_INPUT_FILE_BYTES,
    MAX_INPUT_PIPE_SECONDS,
    STDIN,
    InputFileError,
    read_input_file,
    read_regular_file,
)

__all__ = [
    "MAX_INPUT_FILE_BYTES",
    "MAX_INPUT_PIPE_SECONDS",
    "STDIN",
    "InputFileError",
    "read_input_file",
    "read_regular_file",
]
