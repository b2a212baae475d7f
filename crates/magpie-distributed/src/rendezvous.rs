//! The TCP rendezvous that forms a job: rank 0 listens on `MASTER_ADDR:MASTER_PORT`, the other
//! ranks connect (retrying until the timeout) and introduce themselves; rank 0 checks the world
//! size and that every rank comes once, then sends each the payload it made (the NCCL unique id).
//!
//! The connections stay open afterwards as a liveness channel: a rank that leaves says goodbye
//! first, so a connection that closes without one means that rank died, and [`Liveness`] reports
//! it at once instead of leaving the others to hang in their next collective.
//!
//! Wire format: frames of a little-endian u32 length and that many bytes. Hello: `MGRZ`, version
//! byte, rank u32, world size u32. Reply: tag byte 0 then the payload, or 1 then a UTF-8 error.
//! After the reply, a single byte `B` means goodbye.

use crate::env::DistEnv;
use magpie_core::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 4] = b"MGRZ";
const VERSION: u8 = 1;
const GOODBYE: u8 = b'B';
/// Largest frame accepted (a payload is a 128-byte NCCL id; errors are short sentences).
const MAX_FRAME: usize = 1 << 16;

fn err(msg: impl Into<String>) -> Error {
    Error::value("rendezvous", msg)
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    err(format!("{what}: {e}"))
}

fn write_frame(s: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4 + bytes.len());
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
    s.write_all(&buf)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(std::io::Error::new(ErrorKind::InvalidData, format!("frame of {n} bytes (at most {MAX_FRAME})")));
    }
    let mut v = vec![0u8; n];
    s.read_exact(&mut v)?;
    Ok(v)
}

fn hello(rank: usize, world: usize) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.push(VERSION);
    v.extend_from_slice(&(rank as u32).to_le_bytes());
    v.extend_from_slice(&(world as u32).to_le_bytes());
    v
}

fn parse_hello(v: &[u8]) -> std::result::Result<(usize, usize), String> {
    if v.len() != 13 || &v[..4] != MAGIC {
        return Err("a connection that is not a torch-magpie rank (wrong greeting)".into());
    }
    if v[4] != VERSION {
        return Err(format!("a rank speaking rendezvous version {} (this one speaks {VERSION})", v[4]));
    }
    let r = u32::from_le_bytes([v[5], v[6], v[7], v[8]]) as usize;
    let w = u32::from_le_bytes([v[9], v[10], v[11], v[12]]) as usize;
    Ok((r, w))
}

fn reply_ok(payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(payload);
    v
}

fn reply_err(msg: &str) -> Vec<u8> {
    let mut v = vec![1u8];
    v.extend_from_slice(msg.as_bytes());
    v
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// A formed job: this rank's open connections (rank 0: one per other rank, indexed by rank;
/// others: one to rank 0, at index 0).
pub struct Rendezvous {
    rank: usize,
    world_size: usize,
    peers: Vec<Option<TcpStream>>,
}

impl std::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rendezvous(rank {} of {})", self.rank, self.world_size)
    }
}

impl Rendezvous {
    /// Forms the job described by `env`. Rank 0 calls `make_payload` once every rank has joined
    /// and sends its bytes to all; every rank returns them. A world of one opens no socket.
    pub fn join(env: &DistEnv, make_payload: impl FnOnce() -> Result<Vec<u8>>) -> Result<(Rendezvous, Vec<u8>)> {
        let deadline = Instant::now() + env.timeout;
        if env.world_size == 1 {
            return Ok((Rendezvous { rank: 0, world_size: 1, peers: Vec::new() }, make_payload()?));
        }
        if env.rank == 0 {
            Self::serve(env, deadline, make_payload)
        } else {
            Self::connect(env, deadline)
        }
    }

    fn serve(env: &DistEnv, deadline: Instant, make_payload: impl FnOnce() -> Result<Vec<u8>>) -> Result<(Rendezvous, Vec<u8>)> {
        let world = env.world_size;
        let listener = TcpListener::bind(("0.0.0.0", env.master_port))
            .map_err(|e| io_err(&format!("rank 0 cannot listen on port {} (MASTER_PORT)", env.master_port), e))?;
        listener.set_nonblocking(true).map_err(|e| io_err("listener", e))?;
        let mut peers: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        let mut joined = 1;
        // a fatal problem found while forming: told to every rank that has joined, then returned
        let fail = |peers: &mut Vec<Option<TcpStream>>, msg: String| -> Error {
            for s in peers.iter_mut().flatten() {
                let _ = write_frame(s, &reply_err(&msg));
            }
            err(msg)
        };
        while joined < world {
            let (mut s, addr) = match listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<String> = (1..world).filter(|r| peers[*r].is_none()).map(|r| r.to_string()).collect();
                        let msg = format!(
                            "timed out after {:.0} s waiting for ranks to join rank 0 on port {}: {} of WORLD_SIZE={world} joined; missing rank(s) {}",
                            env.timeout.as_secs_f64(),
                            env.master_port,
                            joined,
                            missing.join(", ")
                        );
                        return Err(fail(&mut peers, msg));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(e) => return Err(fail(&mut peers, format!("accepting a rank failed: {e}"))),
            };
            let _ = s.set_nonblocking(false);
            let _ = s.set_nodelay(true);
            let _ = s.set_read_timeout(Some(remaining(deadline).clamp(Duration::from_millis(10), Duration::from_secs(10))));
            let greeting = match read_frame(&mut s) {
                Ok(g) => g,
                // a stray connection (a port scanner, a health check) is not fatal
                Err(_) => continue,
            };
            let (r, w) = match parse_hello(&greeting) {
                Ok(rw) => rw,
                Err(m) => {
                    let _ = write_frame(&mut s, &reply_err(&format!("rank 0 rejected {m}")));
                    continue;
                }
            };
            if w != world {
                let msg = format!("rank {r} (from {addr}) has WORLD_SIZE={w} but rank 0 has WORLD_SIZE={world}: every rank must be started with the same WORLD_SIZE");
                let _ = write_frame(&mut s, &reply_err(&msg));
                return Err(fail(&mut peers, msg));
            }
            if r == 0 || r >= world {
                let msg = format!("a process from {addr} claims RANK={r}, outside 1..{world} for rank 0's WORLD_SIZE={world}");
                let _ = write_frame(&mut s, &reply_err(&msg));
                return Err(fail(&mut peers, msg));
            }
            if peers[r].is_some() {
                let msg = format!("rank {r} joined twice (the second from {addr}): two processes were started with RANK={r}");
                let _ = write_frame(&mut s, &reply_err(&msg));
                return Err(fail(&mut peers, msg));
            }
            peers[r] = Some(s);
            joined += 1;
        }
        let payload = match make_payload() {
            Ok(p) => p,
            Err(e) => return Err(fail(&mut peers, format!("rank 0 could not set up the job: {e}"))),
        };
        for (r, s) in peers.iter_mut().enumerate() {
            if let Some(s) = s {
                write_frame(s, &reply_ok(&payload)).map_err(|e| io_err(&format!("sending the job to rank {r}"), e))?;
                let _ = s.set_read_timeout(None);
            }
        }
        Ok((Rendezvous { rank: 0, world_size: world, peers }, payload))
    }

    fn connect(env: &DistEnv, deadline: Instant) -> Result<(Rendezvous, Vec<u8>)> {
        let (rank, world) = (env.rank, env.world_size);
        let target = format!("{}:{}", env.master_addr, env.master_port);
        let addrs: Vec<SocketAddr> = (env.master_addr.as_str(), env.master_port)
            .to_socket_addrs()
            .map_err(|e| err(format!("rank {rank} cannot resolve MASTER_ADDR={}: {e}", env.master_addr)))?
            .collect();
        if addrs.is_empty() {
            return Err(err(format!("rank {rank}: MASTER_ADDR={} resolves to no address", env.master_addr)));
        }
        let mut last = String::new();
        let mut stream = None;
        'outer: loop {
            for a in &addrs {
                let left = remaining(deadline);
                if left.is_zero() {
                    break 'outer;
                }
                match TcpStream::connect_timeout(a, left.min(Duration::from_secs(2))) {
                    Ok(s) => {
                        stream = Some(s);
                        break 'outer;
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            std::thread::sleep(Duration::from_millis(50).min(remaining(deadline)));
        }
        let Some(mut s) = stream else {
            return Err(err(format!(
                "rank {rank} could not reach the master (rank 0) at {target} within {:.0} s: {last}. Is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same for every rank?",
                env.timeout.as_secs_f64()
            )));
        };
        let _ = s.set_nodelay(true);
        write_frame(&mut s, &hello(rank, world)).map_err(|e| io_err(&format!("rank {rank} greeting the master at {target}"), e))?;
        let _ = s.set_read_timeout(Some(remaining(deadline).max(Duration::from_millis(10))));
        let reply = read_frame(&mut s).map_err(|e| {
            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                err(format!(
                    "rank {rank} reached the master at {target}, but the job of WORLD_SIZE={world} did not form within {:.0} s: are all {world} processes started?",
                    env.timeout.as_secs_f64()
                ))
            } else {
                io_err(&format!("rank {rank}: the master at {target} closed the connection before the job formed"), e)
            }
        })?;
        let _ = s.set_read_timeout(None);
        match reply.split_first() {
            Some((0, payload)) => {
                let payload = payload.to_vec();
                let mut peers: Vec<Option<TcpStream>> = Vec::with_capacity(1);
                peers.push(Some(s));
                Ok((Rendezvous { rank, world_size: world, peers }, payload))
            }
            Some((1, msg)) => Err(err(format!("rank {rank}: the job could not form: {}", String::from_utf8_lossy(msg)))),
            _ => Err(err(format!("rank {rank}: the master at {target} sent a malformed reply"))),
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Starts watching the connections: `on_lost` is called (from a watcher thread, once) with a
    /// sentence naming the rank when a peer's connection closes without a goodbye.
    pub fn watch(self, on_lost: Arc<dyn Fn(String) + Send + Sync>) -> Liveness {
        let leaving = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for (i, s) in self.peers.into_iter().enumerate() {
            let Some(s) = s else { continue };
            // rank 0 holds index = peer rank; the others hold rank 0 at index 0
            let peer = if self.rank == 0 { i } else { 0 };
            if let Ok(mut reader) = s.try_clone() {
                let (leaving, fired, on_lost) = (leaving.clone(), fired.clone(), on_lost.clone());
                let me = self.rank;
                let _ = std::thread::Builder::new().name(format!("magpie-liveness-{peer}")).spawn(move || {
                    let mut b = [0u8; 1];
                    let clean = matches!(reader.read(&mut b), Ok(1) if b[0] == GOODBYE);
                    if !clean && !leaving.load(Ordering::SeqCst) && !fired.swap(true, Ordering::SeqCst) {
                        on_lost(format!("rank {peer} ended unexpectedly: its rendezvous connection to rank {me} closed without a goodbye"));
                    }
                });
            }
            writers.push(s);
        }
        Liveness { leaving, writers }
    }
}

/// The open connections of a formed job, watched by one thread each (see [`Rendezvous::watch`]).
pub struct Liveness {
    leaving: Arc<AtomicBool>,
    writers: Vec<TcpStream>,
}

impl Liveness {
    /// Tells every peer that this rank is leaving cleanly, then closes the connections. Called
    /// once the last collective has finished; also on drop.
    pub fn goodbye(&mut self) {
        self.leaving.store(true, Ordering::SeqCst);
        for s in self.writers.iter_mut() {
            let _ = s.write_all(&[GOODBYE]);
            let _ = s.shutdown(Shutdown::Write);
        }
        self.writers.clear();
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.goodbye();
    }
}
