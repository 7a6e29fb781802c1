"""The model call path production and the executor share (``llm``), where calls go
(``providers``), what they cost (``prices``) and the spend caps on them (``spend_caps``)."""
