"""An LLM as a rater of its own: graded judgments (0–3) from any OpenAI-compatible endpoint.

    settings.py  `LLMSettings` (server, model, the key's variable, prompt, limits), their validation,
                 the prompt template (UMBRELA's by default) filled in and the grade read from an
                 answer, the settings saved in the store's `_llm_judge` side table
    endpoint.py  the server's address: the base URL checked (no query, fragment or link-local or
                 metadata address unless allowed) and the request URLs built from its parts
    client.py    the HTTP client (httpx): one chat completion or the model list (no redirect
                 followed, no body echoed), what each failure means, and the one retry policy
                 (Retry-After, capped exponential backoff)
    cache.py     every answer cached in SQLite (`JudgeCache`) under the sha256 of what was asked
    run.py       a run: `judge` (the first request alone, then bounded concurrency, small saves,
                 stop), `estimate` (tokens, time, cost before a run), a query set's queue
                 (`queue_items`, `judge_queue`)

Off until configured; the key is read from an environment variable named `*_API_KEY` at request
time and never written anywhere; a failed request is never recorded as a grade.
Entry points: `settings.LLMSettings`, `settings.load_settings`/`save_settings`, `run.judge_queue`,
`run.estimate`.
"""
