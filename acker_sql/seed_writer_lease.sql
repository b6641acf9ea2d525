-- seed_writer_lease.sql
-- What: the writer lease's one row, free, where the table has none. The statement reads the
--       table, so two concurrent seeds conflict in Delta and one of them fails.
-- Who runs it: `acker init`, and a writer that finds an older acker's warehouse without it.
-- Parameters: :writer_lease (table).
insert into identifier(:writer_lease)
select 0, null, null, null, null, null
where not exists (select 1 from identifier(:writer_lease))
