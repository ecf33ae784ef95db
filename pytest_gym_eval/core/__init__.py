"""Small shared pieces every layer uses: files, the run directory's paths, the pytest stash, number formatting,
credentials and defaults."""
