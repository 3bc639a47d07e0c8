"""The outbox: commands staged in turns, and the relay that delivers them as turns.

``staged`` validates what a handler stages (``Turn.send``/``Turn.cancel``); ``intents`` is the
kernel ``TurnHook`` that writes it in the turn's transaction; ``queries`` holds the SQL;
``relay`` claims due rows of the buckets this process owns and runs ``delivery`` for each;
``ownership`` decides which live relay process owns which bucket. The kernel (``akter.actor``)
imports only ``staged``, so this package must not import anything heavy on its own: it stays
empty here. User documentation: ``docs/relay.md``.
"""
