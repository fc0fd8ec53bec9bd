"""Agent CLI profiles: how to find, start, read and answer each agent."""
