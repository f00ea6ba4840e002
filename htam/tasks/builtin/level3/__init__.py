"""Built-in level-3 tasks (task files, not modules to import)."""
