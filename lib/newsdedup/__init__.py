"""newsdedup: a cascade of URL, content, SimHash and semantic deduplication for news archives."""

__version__ = "0.1.0"
