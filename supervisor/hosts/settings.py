"""`[[hosts]]` in the config file: where agents may run besides here. The
settings are read with the rest of the config (`config.py`, a foundation the
host layer builds on); the SSH layer names them from here."""

from ..config import HostSettings, unique_hosts

__all__ = ["HostSettings", "unique_hosts"]
