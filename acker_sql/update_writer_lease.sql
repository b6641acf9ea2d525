-- update_writer_lease.sql
-- What: claims, renews or releases the writer lease, only if its token is still :seen_token
--       (compare and set). The UPDATE rewrites the table's one file, so of two concurrent
--       updates Delta commits one and fails the other; one that finds another token updates
--       no row. Claim: :token = :seen_token + 1; renew and release: :token = :seen_token, and
--       release sets :expires_at null.
-- Who runs it: pipelines.lease, where it does not commit the swap of files itself (a Spark
--              Connect session, a catalog's table).
-- Parameters: :writer_lease (table); :seen_token, :token; :holder, :host, :pid; :claimed_at,
--             :expires_at (UTC timestamps as text, or null).
update identifier(:writer_lease)
set token = :token,
    holder = :holder,
    host = :host,
    pid = :pid,
    claimed_at = cast(:claimed_at as timestamp),
    expires_at = cast(:expires_at as timestamp)
where token = :seen_token
