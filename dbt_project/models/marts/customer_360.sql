-- One row per customer: profile, orders, payments, clicks and fraud alerts.
with orders as (
    select customer_id, count(*) as orders, round(sum(amount), 2) as revenue,
           max(ordered_at) as last_order_at
    from {{ ref('stg_orders') }}
    group by 1
),
payments as (
    select customer_id,
           count(*) filter (where status = 'captured') as payments_captured,
           count(*) filter (where status = 'failed') as payments_failed
    from {{ ref('stg_payments') }}
    group by 1
),
clicks as (
    select user_id as customer_id, count(*) as clicks, max(clicked_at) as last_click_at
    from {{ ref('stg_clicks') }}
    group by 1
),
alerts as (
    select customer_id, count(*) as fraud_alerts
    from {{ ref('stg_fraud_alerts') }}
    group by 1
)
select
    c.customer_id, c.name, c.tier, c.home_region, c.credit_limit,
    coalesce(o.orders, 0) as orders,
    coalesce(o.revenue, 0) as revenue,
    o.last_order_at,
    coalesce(p.payments_captured, 0) as payments_captured,
    coalesce(p.payments_failed, 0) as payments_failed,
    coalesce(k.clicks, 0) as clicks,
    k.last_click_at,
    coalesce(a.fraud_alerts, 0) as fraud_alerts
from {{ ref('stg_customers') }} c
left join orders o using (customer_id)
left join payments p using (customer_id)
left join clicks k using (customer_id)
left join alerts a using (customer_id)
