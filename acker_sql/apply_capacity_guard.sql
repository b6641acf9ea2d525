-- apply_capacity_guard.sql
-- What: fails the newest new trees that have their init at once (reason overflow) so that
--       pending stays within max_pending; newest by first event_time, then anchor_id. A tree
--       without its init is never failed here (nothing is emitted for a tree before its init):
--       it waits in pending, as Storm's acker holds it, and counts toward max_pending.
-- Who runs it: pipelines.engine.plan_batch, only when the batch would overflow.
-- Parameters: :excess, how many new unresolved trees must be refused (fewer are, when fewer
--             new trees have their init).
with ranked as (
    select
        *,
        case
            when action = 'upsert' and is_new and outcome is null and has_init
                then row_number() over (
                    partition by action = 'upsert' and is_new and outcome is null and has_init
                    order by first_event_time desc, anchor_id desc
                )
        end as newest_rank
    from {batch_state}
),

final as (
    select
        * except (newest_rank, outcome, reason),
        case when newest_rank <= :excess then 'failed' else outcome end as outcome,
        case when newest_rank <= :excess then 'overflow' else reason end as reason
    from ranked
)

select * from final
