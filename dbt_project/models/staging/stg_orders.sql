-- Valid orders, one row per order id (the first arrival wins, like the dedup stream app).
with ranked as (
    select
        order_id, customer_id, amount, region, location, event_time,
        to_timestamp(event_time / 1000.0) as ordered_at,
        row_number() over (partition by order_id order by _partition, _offset) as arrival
    from {{ source('lake', 'orders') }}
    where _valid
)
select order_id, customer_id, amount, region, location, event_time, ordered_at
from ranked
where arrival = 1
