"""The review page's routes, one router per concern: log-in, pages, decisions and ``/api/``."""
