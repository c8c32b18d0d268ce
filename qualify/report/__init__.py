"""The report rendered from a run directory: view model, HTML and Markdown, charts."""
