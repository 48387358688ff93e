"""The process a long-running command is: malloc arenas, shared strings, stop signals and background tasks;
knows none of the programs."""
