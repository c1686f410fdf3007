"""Vision-language proposers: the model watches the real and twin videos and proposes parameters.

- :mod:`.prompt` — the calibration prompt, assembled from data (specs, history, metrics, media);
- :mod:`.common` — what they share: reply validation, retries, secret redaction, fallback;
- :mod:`.gemini` — Gemini through the ``google-genai`` SDK (the Vid2Sid calibrator);
- :mod:`.openai_compat` — any OpenAI-compatible ``/chat/completions`` server.

They are built through the registry, :func:`vid2sid_ros.calibration.proposers.make_proposer`.
"""
