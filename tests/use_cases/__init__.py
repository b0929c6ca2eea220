"""Small worlds for end-to-end tests: an NPC on a grid, a weather service."""
