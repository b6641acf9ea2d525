-- delete_expired.sql
-- What: removes the trees a run of ticks expired, after their expired rows are written, and
--       the rows of trees the last batch resolved (no batch can be replayed across a tick).
-- Who runs it: pipelines.engine.tick.
-- Parameters: :pending (table); :cutoff = the run's last epoch - buckets.
delete from identifier(:pending) where outcome is not null or epoch <= :cutoff
