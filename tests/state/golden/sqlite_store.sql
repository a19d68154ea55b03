BEGIN TRANSACTION;
CREATE TABLE chunk_run (
	run_id TEXT NOT NULL, 
	export_name TEXT NOT NULL, 
	plan_hash TEXT NOT NULL, 
	status TEXT NOT NULL, 
	max_chunk_attempts INTEGER DEFAULT 3 NOT NULL, 
	strategy TEXT, 
	chunk_column TEXT, 
	chunk_size BIGINT, 
	created_at TEXT NOT NULL, 
	updated_at TEXT NOT NULL, 
	PRIMARY KEY (run_id), 
	CONSTRAINT ck_chunk_run_status CHECK (status IN ('in_progress', 'completed', 'interrupted'))
);
INSERT INTO "chunk_run" VALUES('big_r1','big','0123456789abcdef','in_progress',3,'range','id',10,'2026-12-02T11:47:35.039447+00:00','2026-12-02T11:47:35.039447+00:00');
CREATE TABLE chunk_task (
	id INTEGER NOT NULL, 
	run_id TEXT NOT NULL, 
	chunk_index INTEGER NOT NULL, 
	start_key TEXT, 
	end_key TEXT, 
	window_key TEXT NOT NULL, 
	status TEXT NOT NULL, 
	attempts INTEGER DEFAULT 0 NOT NULL, 
	last_error TEXT, 
	rows_written BIGINT, 
	file_name TEXT, 
	worker TEXT, 
	updated_at TEXT NOT NULL, 
	worker_pid INTEGER, 
	worker_host TEXT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_chunk_task_run_index UNIQUE (run_id, chunk_index), 
	CONSTRAINT ck_chunk_task_status CHECK (status IN ('pending', 'running', 'completed', 'failed'))
);
INSERT INTO "chunk_task" VALUES(1,'big_r1',0,'0','9','w0','completed',1,NULL,10,'big-0.parquet','w-a','2026-12-02T11:47:35.053977+00:00',6983,'vm');
INSERT INTO "chunk_task" VALUES(2,'big_r1',1,'10','19','w1','failed',3,'boom',NULL,NULL,'w-b','2026-12-02T11:47:35.062887+00:00',6983,'vm');
INSERT INTO "chunk_task" VALUES(3,'big_r1',2,'20','29','w2','pending',0,NULL,NULL,NULL,NULL,'2026-12-02T11:47:35.039447+00:00',NULL,NULL);
CREATE TABLE export_lock (
	lock_key TEXT NOT NULL, 
	token TEXT NOT NULL, 
	mode TEXT NOT NULL, 
	export_name TEXT NOT NULL, 
	run_id TEXT, 
	orchestrator_run_id TEXT, 
	orchestrator TEXT, 
	pid INTEGER NOT NULL, 
	host TEXT NOT NULL, 
	process_start TEXT, 
	started_at TEXT NOT NULL, 
	heartbeat_at TEXT NOT NULL, 
	expires_at TEXT NOT NULL, 
	PRIMARY KEY (lock_key, token), 
	CONSTRAINT ck_export_lock_mode CHECK (mode IN ('exclusive', 'shared'))
);
INSERT INTO "export_lock" VALUES('big','t1','shared','big','big_r1','dg-2','Dagster',1,'elsewhere',NULL,'2026-01-01T00:00:00+00:00','2026-01-01T00:00:00+00:00','2999-01-01T00:00:00+00:00');
CREATE TABLE export_metrics (
	id INTEGER NOT NULL, 
	export_name TEXT NOT NULL, 
	run_id TEXT NOT NULL, 
	run_at TEXT NOT NULL, 
	duration_ms BIGINT NOT NULL, 
	total_rows BIGINT NOT NULL, 
	peak_rss_mb BIGINT, 
	status TEXT NOT NULL, 
	error_message TEXT, 
	error_class TEXT, 
	tuning_profile TEXT, 
	format TEXT, 
	mode TEXT, 
	files_produced BIGINT, 
	files_committed BIGINT, 
	bytes_written BIGINT, 
	retries INTEGER, 
	validated BOOLEAN, 
	schema_changed BOOLEAN, 
	quality_passed BOOLEAN, 
	skip_reason TEXT, 
	schema_fingerprint TEXT, 
	batch_size BIGINT, 
	source_type TEXT, 
	destination_type TEXT, 
	cursor_min TEXT, 
	cursor_max TEXT, 
	rivet_version TEXT, 
	orchestrator_run_id TEXT, 
	source_count BIGINT, 
	reconciled BOOLEAN, 
	PRIMARY KEY (id)
);
INSERT INTO "export_metrics" VALUES(1,'orders','orders_r1','2026-12-02T11:47:35.014831+00:00',0,15,NULL,'running',NULL,NULL,NULL,'parquet','full',2,2,150,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO "export_metrics" VALUES(2,'orders','orders_r0','2026-01-01T00:00:00+00:00',7,3,NULL,'success',NULL,NULL,NULL,NULL,NULL,0,0,0,0,1,0,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,3,NULL);
CREATE TABLE export_progression (
	export_name TEXT NOT NULL, 
	last_committed_strategy TEXT, 
	last_committed_cursor TEXT, 
	last_committed_chunk_index BIGINT, 
	last_committed_run_id TEXT, 
	last_committed_at TEXT, 
	last_verified_strategy TEXT, 
	last_verified_cursor TEXT, 
	last_verified_chunk_index BIGINT, 
	last_verified_run_id TEXT, 
	last_verified_at TEXT, 
	PRIMARY KEY (export_name)
);
INSERT INTO "export_progression" VALUES('orders','incremental','41',NULL,'orders_r1','2026-12-02T11:47:35.035033+00:00',NULL,NULL,NULL,NULL,NULL);
INSERT INTO "export_progression" VALUES('big','chunked',NULL,0,'big_r1','2026-12-02T11:47:35.067524+00:00',NULL,NULL,NULL,NULL,NULL);
CREATE TABLE export_schema (
	export_name TEXT NOT NULL, 
	columns_json TEXT NOT NULL, 
	updated_at TEXT NOT NULL, 
	PRIMARY KEY (export_name)
);
INSERT INTO "export_schema" VALUES('orders','[{"name": "id", "type": "int64"}]','2026-12-02T11:47:34.996095+00:00');
CREATE TABLE export_state (
	export_name TEXT NOT NULL, 
	last_cursor_value TEXT, 
	last_run_at TEXT, 
	resume_run_id TEXT, 
	PRIMARY KEY (export_name)
);
INSERT INTO "export_state" VALUES('orders','41','2026-12-02T11:47:34.991322+00:00',NULL);
CREATE TABLE file_log (
	id INTEGER NOT NULL, 
	run_id TEXT NOT NULL, 
	export_name TEXT NOT NULL, 
	file_name TEXT NOT NULL, 
	row_count BIGINT NOT NULL, 
	bytes BIGINT NOT NULL, 
	format TEXT, 
	compression TEXT, 
	created_at TEXT NOT NULL, 
	cursor_high TEXT, 
	PRIMARY KEY (id)
);
INSERT INTO "file_log" VALUES(1,'orders_r1','orders','part-0.parquet',10,100,'parquet','zstd','2026-12-02T11:47:35.004874+00:00','41');
INSERT INTO "file_log" VALUES(2,'orders_r1','orders','part-1.parquet',5,50,'parquet','zstd','2026-12-02T11:47:35.014831+00:00','41');
CREATE TABLE rivet_schema_version (
	version INTEGER NOT NULL, 
	applied_at TEXT NOT NULL, 
	PRIMARY KEY (version)
);
INSERT INTO "rivet_schema_version" VALUES(1,'2026-12-02T11:47:34.979601+00:00');
INSERT INTO "rivet_schema_version" VALUES(2,'2026-12-02T11:47:34.983706+00:00');
INSERT INTO "rivet_schema_version" VALUES(3,'2026-12-02T11:47:34.985471+00:00');
INSERT INTO "rivet_schema_version" VALUES(4,'2026-12-02T11:47:34.985968+00:00');
INSERT INTO "rivet_schema_version" VALUES(5,'2026-12-02T11:47:34.986677+00:00');
CREATE TABLE run_journal (
	run_id TEXT NOT NULL, 
	export_name TEXT NOT NULL, 
	finished_at TEXT NOT NULL, 
	journal_json TEXT NOT NULL, 
	PRIMARY KEY (run_id)
);
INSERT INTO "run_journal" VALUES('orders_r1','orders','2026-12-02T11:47:35.031361+00:00','{"events": [{"k": "v"}]}');
CREATE TABLE run_status (
	run_id TEXT NOT NULL, 
	export_name TEXT NOT NULL, 
	prefix TEXT, 
	status TEXT NOT NULL, 
	started_at TEXT NOT NULL, 
	finished_at TEXT, 
	orchestrator_run_id TEXT, 
	PRIMARY KEY (run_id)
);
INSERT INTO "run_status" VALUES('orders_r1','orders','orders/','success','2026-12-02T11:47:35.000417+00:00','2026-12-02T11:47:35.029205+00:00','dg-1');
CREATE INDEX idx_file_log_run ON file_log (run_id, file_name);
CREATE INDEX idx_file_log_export ON file_log (export_name, id);
CREATE INDEX idx_export_metrics_export ON export_metrics (export_name, id);
CREATE UNIQUE INDEX export_metrics_one_running_per_run ON export_metrics (run_id) WHERE status = 'running';
CREATE INDEX idx_run_journal_export ON run_journal (export_name, finished_at);
CREATE INDEX idx_run_status_prefix ON run_status (prefix);
CREATE INDEX idx_chunk_run_export_status ON chunk_run (export_name, status);
CREATE UNIQUE INDEX idx_chunk_run_one_inprogress ON chunk_run (export_name) WHERE status = 'in_progress';
CREATE INDEX idx_chunk_task_run_status ON chunk_task (run_id, status);
CREATE INDEX idx_export_lock_export ON export_lock (export_name);
COMMIT;
