-- Fraud alerts from the stream application, one per rule and order (bursts: per window).
with ranked as (
    select
        rule, customer_id, order_id, amount, event_time, window_start, evidence,
        to_timestamp(event_time / 1000.0) as alerted_at,
        row_number() over (
            partition by rule, customer_id,
                case when rule = 'rapid_burst' then cast(window_start as varchar) else order_id end
            order by _partition, _offset
        ) as arrival
    from {{ source('lake', 'fraud-alerts') }}
    where _valid
)
select rule, customer_id, order_id, amount, event_time, window_start, evidence, alerted_at
from ranked
where arrival = 1
