"""The service's own pages: the sweeps, one sweep live, and the API's docs, offline.

Server-rendered (Jinja2 templates) with one small script that re-renders a page's
live part from the server while its sweeps run; every asset ships in this package
or in a Python dependency (no build step, no CDN). The pages read what the API
reads, with the same owner rules: an API key in a header, or in the cookie the
sign-in form sets; none on a loopback service without keys.
"""
