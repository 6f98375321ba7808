\timing off
TRUNCATE txmq_outbox;
INSERT INTO txmq_outbox (id, topic, key, payload) SELECT (lpad(to_hex(1700000000000 + i / 1000), 12, '0') || '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid, 't', 'k' || (i % 1000), decode(repeat('ab', 256), 'hex') FROM generate_series(0, 199999) i;
VACUUM ANALYZE txmq_outbox;
-- drain as the relay does: delete in id batches
DO $$ DECLARE lo bigint; BEGIN FOR lo IN 0..199 LOOP DELETE FROM txmq_outbox WHERE id IN (SELECT id FROM txmq_outbox ORDER BY seq LIMIT 1000); END LOOP; END $$;
-- steady writers add a few rows
INSERT INTO txmq_outbox (topic, key, payload) SELECT 't', 'n' || i, decode(repeat('ab', 256), 'hex') FROM generate_series(1, 20) i;
SET plan_cache_mode = force_generic_plan;
PREPARE rd(int[], bigint[], int, bigint) AS SELECT r.id, r.seq, s.shard FROM unnest($1::int[], $2::bigint[]) AS s(shard, after) CROSS JOIN LATERAL (SELECT * FROM txmq_outbox o WHERE o.shard = s.shard AND o.seq > s.after AND o.seq <= $4 ORDER BY o.seq LIMIT $3) r;
SELECT count(DISTINCT shard) AS shards FROM txmq_outbox;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE rd('{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}', '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}', 500, 9223372036854775807);
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE rd('{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}', '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}', 500, 9223372036854775807);
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE rd('{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}', '{200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000,200000}', 500, 9223372036854775807);
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) INSERT INTO txmq_outbox (topic, key, payload) VALUES ('t', 'x', decode(repeat('ab', 256), 'hex'));
VACUUM txmq_outbox;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE rd('{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}', '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}', 500, 9223372036854775807);
