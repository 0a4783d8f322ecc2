"""Errors a user can act on: the command line prints them as `error: ...` and exits 2, no traceback."""


class UserError(Exception):
    pass
