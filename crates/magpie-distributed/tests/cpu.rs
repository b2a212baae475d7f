//! The parts that need no GPU: environment parsing, the TCP rendezvous over loopback (several
//! ranks as threads; timeouts, a wrong world size, a duplicate rank, a dead peer), the samplers and
//! the launcher (argument checks; a failing rank ends the others and is named).

use magpie_distributed::launch::{launch, LaunchConfig};
use magpie_distributed::{BatchShard, DistEnv, DistributedSampler, Rendezvous};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn env_of(pairs: &[(&str, &str)]) -> magpie_core::Result<DistEnv> {
    let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    DistEnv::from_lookup(|k| m.get(k).cloned())
}

fn dist(rank: usize, world: usize, port: u16, timeout_s: f64) -> DistEnv {
    DistEnv {
        rank,
        world_size: world,
        local_rank: rank,
        local_world_size: world,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        timeout: Duration::from_secs_f64(timeout_s),
    }
}

#[test]
fn env_reads_torchrun_variables() {
    let e = env_of(&[("RANK", "3"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "2"), ("MASTER_ADDR", "10.0.0.7"), ("MASTER_PORT", "1234"), ("MAGPIE_DIST_TIMEOUT", "2.5")]).unwrap();
    assert_eq!((e.rank, e.world_size, e.local_rank, e.local_world_size, e.master_port), (3, 8, 1, 2, 1234));
    assert_eq!(e.master_addr, "10.0.0.7");
    assert_eq!(e.timeout, Duration::from_millis(2500));
    // defaults: LOCAL_RANK = RANK, torchrun's port, loopback
    let d = env_of(&[("RANK", "1"), ("WORLD_SIZE", "2")]).unwrap();
    assert_eq!((d.local_rank, d.local_world_size, d.master_port, d.master_addr.as_str()), (1, 2, 29500, "127.0.0.1"));
}

#[test]
fn env_errors_name_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("WORLD_SIZE", "2")], "RANK is not set"),
        (&[("RANK", "0")], "WORLD_SIZE is not set"),
        (&[("RANK", "x"), ("WORLD_SIZE", "2")], "RANK=\"x\""),
        (&[("RANK", "2"), ("WORLD_SIZE", "2")], "RANK=2 is not below WORLD_SIZE=2"),
        (&[("RANK", "0"), ("WORLD_SIZE", "0")], "WORLD_SIZE must be at least 1"),
        (&[("RANK", "0"), ("WORLD_SIZE", "-1")], "WORLD_SIZE=\"-1\""),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "2")], "LOCAL_RANK=2"),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "3")], "LOCAL_WORLD_SIZE=3"),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "70000")], "MASTER_PORT=\"70000\""),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "0")], "MASTER_PORT must be"),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", " ")], "MASTER_ADDR is empty"),
        (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MAGPIE_DIST_TIMEOUT", "-3")], "MAGPIE_DIST_TIMEOUT"),
    ];
    for (vars, want) in cases {
        let e = env_of(vars).unwrap_err().to_string();
        assert!(e.contains(want), "{vars:?}: {e}");
    }
}

/// Runs one thread per env; returns each rank's result in order.
fn join_all(envs: Vec<DistEnv>) -> Vec<magpie_core::Result<(Rendezvous, Vec<u8>)>> {
    let handles: Vec<_> = envs
        .into_iter()
        .map(|e| std::thread::spawn(move || Rendezvous::join(&e, || Ok(b"nccl-id-bytes".to_vec()))))
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn rendezvous_hands_rank0_payload_to_everyone() {
    let port = free_port();
    // the other ranks start first and retry until rank 0 listens
    let envs: Vec<DistEnv> = (0..4).rev().map(|r| dist(r, 4, port, 20.0)).collect();
    let mut got = join_all(envs);
    got.reverse();
    for (r, res) in got.into_iter().enumerate() {
        let (rz, payload) = res.unwrap_or_else(|e| panic!("rank {r}: {e}"));
        assert_eq!((rz.rank(), rz.world_size()), (r, 4));
        assert_eq!(payload, b"nccl-id-bytes");
    }
}

#[test]
fn rendezvous_world_of_one_opens_nothing() {
    let (rz, p) = Rendezvous::join(&dist(0, 1, 1, 1.0), || Ok(vec![7])).unwrap();
    assert_eq!((rz.world_size(), p), (1, vec![7]));
}

#[test]
fn rendezvous_rejects_a_wrong_world_size() {
    let port = free_port();
    let mut bad = dist(1, 3, port, 10.0);
    bad.world_size = 3;
    let got = join_all(vec![dist(0, 2, port, 10.0), bad]);
    let e0 = got[0].as_ref().err().expect("rank 0 must fail").to_string();
    let e1 = got[1].as_ref().err().expect("rank 1 must fail").to_string();
    assert!(e0.contains("WORLD_SIZE=3") && e0.contains("WORLD_SIZE=2"), "{e0}");
    assert!(e1.contains("WORLD_SIZE=3"), "{e1}");
}

#[test]
fn rendezvous_rejects_a_duplicate_rank() {
    let port = free_port();
    let got = join_all(vec![dist(0, 3, port, 10.0), dist(1, 3, port, 10.0), dist(1, 3, port, 10.0)]);
    let e0 = got[0].as_ref().err().expect("rank 0 must fail").to_string();
    assert!(e0.contains("rank 1 joined twice"), "{e0}");
    // both rank-1 processes hear it too (the one that joined first is told when the job fails)
    for r in &got[1..] {
        let e = r.as_ref().err().expect("a duplicate must fail").to_string();
        assert!(e.contains("joined twice"), "{e}");
    }
}

#[test]
fn unreachable_master_is_a_clear_error_within_the_timeout() {
    let port = free_port(); // nobody listens
    let t0 = Instant::now();
    let e = Rendezvous::join(&dist(1, 2, port, 0.6), || Ok(vec![])).unwrap_err().to_string();
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert!(e.contains("could not reach the master (rank 0) at 127.0.0.1:") && e.contains("MASTER_ADDR"), "{e}");
}

#[test]
fn unresolvable_master_is_a_clear_error() {
    let mut e = dist(1, 2, 29500, 1.0);
    e.master_addr = "no-such-host.invalid".into();
    let msg = Rendezvous::join(&e, || Ok(vec![])).unwrap_err().to_string();
    assert!(msg.contains("cannot resolve MASTER_ADDR=no-such-host.invalid"), "{msg}");
}

#[test]
fn rank0_times_out_naming_the_missing_ranks() {
    let port = free_port();
    let got = join_all(vec![dist(0, 3, port, 1.0), dist(2, 3, port, 1.0)]);
    let e0 = got[0].as_ref().err().expect("rank 0 must time out").to_string();
    assert!(e0.contains("timed out") && e0.contains("missing rank(s) 1"), "{e0}");
    let e2 = got[1].as_ref().err().expect("rank 2 must fail").to_string();
    assert!(e2.contains("missing rank(s) 1") || e2.contains("did not form"), "{e2}");
}

#[test]
fn a_peer_that_leaves_without_goodbye_is_reported_and_a_clean_one_is_not() {
    let port = free_port();
    let mut got = join_all(vec![dist(0, 3, port, 10.0), dist(1, 3, port, 10.0), dist(2, 3, port, 10.0)]);
    let r2 = got.pop().unwrap().unwrap().0;
    let r1 = got.pop().unwrap().unwrap().0;
    let r0 = got.pop().unwrap().unwrap().0;
    let lost: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = lost.clone();
    let _live0 = r0.watch(Arc::new(move |m| l.lock().unwrap().push(m)));
    let calls1 = Arc::new(AtomicUsize::new(0));
    let c1 = calls1.clone();
    let mut live1 = r1.watch(Arc::new(move |_| {
        c1.fetch_add(1, Ordering::SeqCst);
    }));
    live1.goodbye(); // rank 1 leaves cleanly
    drop(r2); // rank 2 "crashes": its connection closes with no goodbye
    let t0 = Instant::now();
    while lost.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    let l = lost.lock().unwrap();
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].contains("rank 2 ended unexpectedly"), "{}", l[0]);
    assert_eq!(calls1.load(Ordering::SeqCst), 0);
}

#[test]
fn batch_shards_cover_the_global_batch() {
    let t = magpie_core::Tensor::from_vec((0..12i64).collect::<Vec<_>>(), &[6, 2]).unwrap();
    let mut all = Vec::new();
    for r in 0..3 {
        let s = BatchShard::new(r, 3).unwrap();
        assert_eq!(s.rows(6).unwrap(), 2 * r..2 * r + 2);
        all.extend(s.slice(&t).unwrap().to_vec::<i64>().unwrap());
    }
    assert_eq!(all, (0..12).collect::<Vec<_>>());
    let e = BatchShard::new(0, 4).unwrap().rows(6).unwrap_err().to_string();
    assert!(e.contains("does not split evenly over 4 ranks"), "{e}");
    assert!(BatchShard::new(2, 2).is_err());
}

/// The sampler lives in magpie-data (its partition, shuffle and epoch tests are there); ranks reach
/// it through this crate's re-export.
#[test]
fn distributed_sampler_is_reexported() {
    let plain = DistributedSampler::new(5, 1, 2, false, 0, false).unwrap();
    assert_eq!(plain.indices(), vec![1, 3, 0]);
}

#[test]
fn launch_config_checks_and_rank_environment() {
    let ok = LaunchConfig { nproc_per_node: 4, nnodes: 2, node_rank: 1, master_addr: "10.1.2.3".into(), master_port: 4000, ..LaunchConfig::default() };
    ok.validate(true).unwrap();
    let env: HashMap<String, String> = ok.env_of(2).into_iter().collect();
    assert_eq!(env["RANK"], "6");
    assert_eq!(env["WORLD_SIZE"], "8");
    assert_eq!(env["LOCAL_RANK"], "2");
    assert_eq!(env["LOCAL_WORLD_SIZE"], "4");
    assert_eq!(env["GROUP_RANK"], "1");
    assert_eq!(env["MASTER_ADDR"], "10.1.2.3");
    assert_eq!(env["MASTER_PORT"], "4000");
    let bad = |c: LaunchConfig, given: bool, want: &str| {
        let e = c.validate(given).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    };
    bad(LaunchConfig { nproc_per_node: 0, ..ok.clone() }, true, "--nproc-per-node must be at least 1");
    bad(LaunchConfig { nnodes: 0, node_rank: 0, ..ok.clone() }, true, "--nnodes must be at least 1");
    bad(LaunchConfig { node_rank: 2, ..ok.clone() }, true, "--node-rank 2 must be below --nnodes 2");
    bad(ok.clone(), false, "needs --master-addr");
    bad(LaunchConfig { master_port: 0, ..ok.clone() }, true, "--master-port");
}

/// Not a test: the process the launcher tests start (`MAGPIE_TEST_WORKER` says what to do).
#[test]
#[ignore]
fn launcher_worker() {
    let rank: usize = std::env::var("RANK").unwrap().parse().unwrap();
    match std::env::var("MAGPIE_TEST_WORKER").as_deref() {
        Ok("ok") => {
            let e = DistEnv::from_env().unwrap();
            let dir = std::env::var("MAGPIE_TEST_DIR").unwrap();
            std::fs::write(format!("{dir}/rank{rank}"), format!("{} {} {}", e.rank, e.world_size, e.local_rank)).unwrap();
        }
        Ok("fail-rank1") => {
            if rank == 1 {
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(7);
            }
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown worker mode {other:?}"),
    }
}

fn worker_args() -> Vec<std::ffi::OsString> {
    ["launcher_worker", "--exact", "--ignored", "--nocapture", "--test-threads", "1"].iter().map(|s| s.into()).collect()
}

/// Runs the ignored test `driver` in a process of its own with the worker mode in its
/// environment (the launcher's children inherit it; tests of this process run in parallel).
fn drive(driver: &str, mode: &str, extra: &[(&str, String)]) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([driver, "--exact", "--ignored", "--nocapture"]).env("MAGPIE_TEST_WORKER", mode);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn launcher_sets_each_rank_environment() {
    let dir = tempfile_dir();
    drive("launcher_ok_driver", "ok", &[("MAGPIE_TEST_DIR", dir.clone()), ("MAGPIE_TEST_PORT", free_port().to_string())]);
    for r in 0..3 {
        let s = std::fs::read_to_string(format!("{dir}/rank{r}")).unwrap();
        assert_eq!(s, format!("{r} 3 {r}"));
    }
}

#[test]
fn launcher_ends_the_others_when_a_rank_fails() {
    drive("launcher_fail_driver", "fail-rank1", &[("MAGPIE_TEST_PORT", free_port().to_string())]);
}

/// Not a test: runs the launcher over well-behaved workers in its own process (see above).
#[test]
#[ignore]
fn launcher_ok_driver() {
    let port: u16 = std::env::var("MAGPIE_TEST_PORT").unwrap().parse().unwrap();
    let cfg = LaunchConfig { nproc_per_node: 3, master_port: port, ..LaunchConfig::default() };
    launch(&cfg, &std::env::current_exe().unwrap(), &worker_args()).unwrap();
}

/// Not a test: runs the launcher over failing workers in its own process (see above).
#[test]
#[ignore]
fn launcher_fail_driver() {
    let port: u16 = std::env::var("MAGPIE_TEST_PORT").unwrap().parse().unwrap();
    let cfg = LaunchConfig { nproc_per_node: 3, master_port: port, grace: Duration::from_secs(2), ..LaunchConfig::default() };
    let t0 = Instant::now();
    let e = launch(&cfg, &std::env::current_exe().unwrap(), &worker_args()).unwrap_err().to_string();
    // the sleeping ranks were ended (SIGTERM) long before their 60 s
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    assert!(e.contains("rank 1 (local rank 1") && e.contains("exit status 7") && e.contains("other ranks were ended"), "{e}");
}

fn tempfile_dir() -> String {
    let d = std::env::temp_dir().join(format!("magpie-launch-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&d).unwrap();
    d.display().to_string()
}
