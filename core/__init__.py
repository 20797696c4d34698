"""sandboxed-coding-agent's core: the host, the data model and what every plugin relies on."""

#: The distribution's version, as pyproject.toml states it (a test keeps them equal): read
#: here rather than through importlib.metadata, whose import alone costs the CLI's start
#: more than any command's own work.
__version__ = "0.1.0"
