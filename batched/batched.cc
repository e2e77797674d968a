// The batched module's host API (issue 5): being written.
