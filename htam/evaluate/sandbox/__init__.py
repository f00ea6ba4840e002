"""The isolation plumbing: the fork server, the namespaces, mounts, syscall filter and user of each isolated process. Trusted code that runs before any candidate code exists."""
