"""Trusted code of the evaluator's host side (the CLI's process): the evaluator's stages, the watchdog, the fork server's client, caches and their seals, the verdict, the static check."""
