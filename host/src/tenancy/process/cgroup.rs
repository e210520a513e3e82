//! A tenant's CPU bound: its runs' processes share one control group whose
//! CPU quota is the tenant's `cpus`, so however many threads its runs
//! start, together they use at most that many cores. Linux's cgroup v2
//! (`cpu.max`) is used where the server's own group may delegate the `cpu`
//! controller, else cgroup v1's `cpu` hierarchy (`cpu.cfs_quota_us`).

use std::io;
use std::path::{Path, PathBuf};

/// The scheduler period quotas are counted in, in microseconds.
const PERIOD_US: u64 = 100_000;

/// One tenant's control group.
#[derive(Debug)]
pub struct TenantCpu {
    dir: PathBuf,
}

impl TenantCpu {
    /// A group for `tenant` whose processes together use at most `cpus`
    /// cores, under a group of this server's own (`weir-<pid>`).
    pub fn new(tenant: &str, cpus: f64) -> io::Result<Self> {
        let quota = quota_us(cpus);
        if let Some(base) = v2_base() {
            remove_stale(&base);
            let dir = base.join(format!("weir-{}-{tenant}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("cpu.max"), format!("{quota} {PERIOD_US}"))?;
            return Ok(Self { dir });
        }
        let base = v1_base().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "no cgroup with a cpu controller this process may manage \
                 (cgroup v2 with `cpu` delegated, or v1's cpu hierarchy, writable)",
            )
        })?;
        remove_stale(&base);
        let dir = base.join(format!("weir-{}-{tenant}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string())?;
        std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())?;
        Ok(Self { dir })
    }

    /// Put process `pid` (and the threads it will start) in the group.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }
}

impl Drop for TenantCpu {
    /// The group goes once empty (its runs' processes have ended).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Remove the groups in `base` of servers that are gone (killed before
/// they could remove their own); a group with processes in it stays.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("weir-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// `cpus` cores as a quota per [`PERIOD_US`] (at least 1 ms).
fn quota_us(cpus: f64) -> u64 {
    ((cpus * PERIOD_US as f64).round() as u64).max(1000)
}

/// This process's cgroup v2 directory, if the `cpu` controller is
/// delegated to its children (or can be).
fn v2_base() -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let own = own_group(|line| line.strip_prefix("0::"))?;
    let base = root.join(own.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers")).ok()?;
    if !controllers.split_whitespace().any(|c| c == "cpu") {
        return None;
    }
    let delegated = std::fs::read_to_string(base.join("cgroup.subtree_control")).ok()?;
    if !delegated.split_whitespace().any(|c| c == "cpu") {
        std::fs::write(base.join("cgroup.subtree_control"), "+cpu").ok()?;
    }
    Some(base)
}

/// This process's cgroup v1 `cpu` directory, if it is writable.
fn v1_base() -> Option<PathBuf> {
    let own = own_group(|line| {
        let (_, rest) = line.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    })?;
    for mount in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
        let base = Path::new(mount).join(own.trim_start_matches('/'));
        if base.join("cpu.cfs_quota_us").exists() && writable(&base) {
            return Some(base);
        }
    }
    None
}

/// The path `pick` finds in a line of `/proc/self/cgroup`.
fn own_group(pick: impl Fn(&str) -> Option<&str>) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| pick(line).map(str::to_owned))
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!("weir-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&probe).is_ok();
    if made {
        let _ = std::fs::remove_dir(&probe);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_cores_is_a_quota_of_each_period() {
        assert_eq!(quota_us(0.5), 50_000);
        assert_eq!(quota_us(2.0), 200_000);
        assert_eq!(quota_us(0.0001), 1000, "at least a millisecond");
    }
}
