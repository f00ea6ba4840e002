"""Built-in level-1 tasks (task files, not modules to import)."""
