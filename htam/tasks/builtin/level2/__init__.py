"""Built-in level-2 tasks (task files, not modules to import)."""
