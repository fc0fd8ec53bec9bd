"""Other machines: hosts from the config, one multiplexed SSH connection per
host, and what a host can do (`corral hosts`)."""
