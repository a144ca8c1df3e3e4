"""Device memory analyses (allocator events, allocator calls)."""
