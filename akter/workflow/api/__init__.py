"""What a user declares and awaits: ``akter.Actor``'s workflow members, steps, policies, effects.

The bottom layer of ``akter.workflow``: it imports no other layer of the package. The body's
context, the determinism record it writes through and the history rows it reads are here because
``declare`` is declared with them.
"""
