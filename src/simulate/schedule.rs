//! Seeded construction of the cluster: nodes and their devices, squatters, pods packed onto each
//! node's lanes over time (with restarts), the sandbox pods with an unknown resource, and the
//! exporter anomalies (H100 scrape gaps, NaN on an A100).
//!
//! Every node draws from its own ChaCha8 stream (seed, node, purpose), so a node's schedule does
//! not depend on how many values another node consumed.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::clock::{DAY_MS, HOUR_MS};
use super::layout::{
    Exporter, GPUS_PER_NODE, HAMI_LANE_LAYOUTS, MIG_1G, MIG_1G_A30, MIG_2G, MIG_2G_A30, MIG_3G, MIG_4G_A30, MIG_7G,
    MIG_SINGLE_PER_CARD, MIG_SLICES, MIG_WHOLE_CARDS, MigProfile, NS_SANDBOX, NodeType, Profile,
};
use super::model::{Cluster, Emitter, EmitterKind, Grid, Hold, Kind, Lane, LaneRef, Node, Pod};
use super::workload::{Class, Draw, Pattern, hash2, hash3};

const MIN_MS: i64 = 60_000;
const SALT_LAYOUT: u64 = 1;
const SALT_FILL: u64 = 2;
const SALT_SQUAT: u64 = 3;
const SALT_UNKNOWN: u64 = 4;
const SALT_ANOMALY: u64 = 5;
const SALT_UUID: u64 = 6;
const SALT_NAMES: u64 = 7;
const SALT_KSM: u64 = 8;

/// The KSM gap cardhour bridges by default (`--ksm-gap-bridge 15m`), and how far beyond an hour it reads KSM with
/// it (the span and 5 minutes): the simulated outages are placed on either side of the one, within the other.
pub const KSM_BRIDGE_MS: i64 = 15 * MIN_MS;
const KSM_MARGIN_MS: i64 = KSM_BRIDGE_MS + 5 * MIN_MS;

/// Exporter offsets as a fraction of the scrape interval (always < 1/2, so a sample matches the
/// grid point just before it).
const OFFSET_FRACTIONS: [f64; 4] = [0.1, 0.2, 0.35, 0.45];

impl<R: Rng + ?Sized> Draw for R {
    fn u(&mut self) -> f64 {
        self.random::<f64>()
    }
}

/// Truncate to whole seconds (Kubernetes timestamps have second resolution).
fn sec(t: i64) -> i64 {
    t - t.rem_euclid(1000)
}

/// Which lanes a pod of a group may take together.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Constraint {
    Any,
    /// Time-slicing: all replicas on one card.
    SameCard,
    /// HAMi: each requested GPU on a different card.
    DistinctCards,
    /// A HAMi container asking for `nvidia_com_gpu` alone: every lane of one card.
    WholeCard,
}

/// The kind of unit a lane group offers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GroupKind {
    Whole,
    Mig(MigProfile),
    TimeSlice,
    Hami,
    /// A HAMi container asking for a whole card.
    HamiWhole,
}

struct Builder {
    profile: Profile,
    grid: Grid,
    /// The utilization scrape grid (DCGM, HAMi's monitor): exporter sample indices are its indices.
    util: Grid,
    seed: u64,
    nodes: Vec<Node>,
    emitters: Vec<Emitter>,
    pods: Vec<Pod>,
    names: Vec<String>,
    name_salt: u64,
    /// Guarantees at least one restart: the first eligible pod on node 0 fails and comes back.
    force_restart: bool,
}

/// Build the cluster of `profile` for `gpus` cards (a multiple of 8) with kube-state-metrics on `grid` and the
/// exporters on `util`, with kube-state-metrics outages when `ksm_gaps`.
pub fn build(profile: Profile, gpus: u32, seed: u64, grid: Grid, util: Grid, ksm_gaps: bool) -> Cluster {
    let n_nodes = (gpus / GPUS_PER_NODE) as usize;
    let mut b = Builder {
        profile,
        grid,
        util,
        seed,
        nodes: Vec::with_capacity(n_nodes),
        emitters: Vec::new(),
        pods: Vec::new(),
        names: Vec::new(),
        name_salt: hash2(seed, SALT_NAMES),
        force_restart: true,
    };
    for i in 0..n_nodes {
        b.add_node(i);
    }
    b.place_squatters(gpus);
    for i in 0..n_nodes {
        b.fill_node(i);
    }
    b.unknown_pods();
    for e in &mut b.emitters {
        let off = b.nodes[e.node].offset_ms;
        e.build_segs(&b.util, off);
    }
    b.anomalies();
    let ksm_gaps = if ksm_gaps { ksm_outages(seed, &grid) } else { Vec::new() };
    Cluster { nodes: b.nodes, emitters: b.emitters, pods: b.pods, names: b.names, ksm_gaps, util }
}

/// kube-state-metrics restarts: from the second hour to the last but one, one outage per hour, in turn short
/// inside the hour, short across its end, long inside, long across its end. Short ones miss at most the default
/// bridge (bridged); long ones more, but their two sides stay within the margin cardhour reads KSM with, so every
/// hour they touch sees both (long ones are left out where the scrape interval leaves no such length: Δ > 150 s).
pub fn ksm_outages(seed: u64, grid: &Grid) -> Vec<(u64, u64)> {
    let step = grid.step_ms;
    let mut rng = ChaCha8Rng::seed_from_u64(hash2(seed, SALT_KSM));
    let short_max = (KSM_BRIDGE_MS / step).max(1);
    let long = (KSM_BRIDGE_MS / step + 1, KSM_MARGIN_MS / step - 1);
    let hours = (grid.end_ms - grid.start_ms) / HOUR_MS;
    let mut out: Vec<(u64, u64)> = Vec::new();
    for h in 1..hours - 1 {
        let from = grid.start_ms + h * HOUR_MS;
        let scrapes = |minutes: i64| ((minutes * MIN_MS + step / 2) / step).clamp(1, short_max);
        let (minute, n) = match (h - 1) % 4 {
            0 => (rng.int(20, 36), scrapes(rng.int(3, 13))),
            1 => (rng.int(53, 58), scrapes(rng.int(8, 15))),
            p if long.0 <= long.1 => {
                (if p == 2 { rng.int(20, 36) } else { rng.int(48, 56) }, rng.int(long.0, long.1 + 1))
            }
            _ => continue,
        };
        let ka = grid.count_before(from + minute * MIN_MS, 0);
        let kb = ka + n as u64;
        // a scrape before and after each, and one between two
        if ka == 0 || kb >= grid.len || out.last().is_some_and(|g| g.1 >= ka) {
            continue;
        }
        out.push((ka, kb));
    }
    out
}

impl Builder {
    fn rng(&self, a: u64, salt: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(hash3(self.seed, a, salt))
    }

    fn lane(&self, r: LaneRef) -> &Lane {
        &self.emitters[r.emitter].lanes[r.lane as usize]
    }

    fn lane_mut(&mut self, r: LaneRef) -> &mut Lane {
        &mut self.emitters[r.emitter].lanes[r.lane as usize]
    }

    fn days(&self) -> i64 {
        (self.grid.end_ms - self.grid.start_ms + DAY_MS - 1) / DAY_MS
    }

    fn uuid(&self, node: usize, card: u32) -> String {
        let a = hash3(self.seed, SALT_UUID, (node as u64) << 8 | card as u64);
        let b = hash2(a, SALT_UUID);
        format!(
            "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    fn add_node(&mut self, i: usize) {
        let ty = NodeType::of_node(self.profile, i);
        // the shared profile, and the exactness profile's nodes whose exporter drops idle cards, start idle
        // (but the GFD-labelled one, whose last card stays idle throughout: only GFD counts it)
        let shared_profile = self.profile == Profile::Shared
            || (self.profile == Profile::Exactness
                && ty.exporter() == Exporter::CopiesDropIdle
                && ty != NodeType::TsPlainL40S);
        let mut rng = self.rng(i as u64, SALT_LAYOUT);
        let frac = OFFSET_FRACTIONS[rng.random_range(0..OFFSET_FRACTIONS.len())];
        let offset_ms = (frac * self.util.step_ms as f64).round() as i64;
        let first = self.emitters.len();
        let push = |b: &mut Builder, rng: &mut ChaCha8Rng, card: u32, kind: EmitterKind, budgets: &[u32]| {
            let lanes = budgets
                .iter()
                .map(|&budget| {
                    let before = rng.int(0, 6 * HOUR_MS);
                    Lane {
                        // Lanes start busy for a while before the window, so pods are already running (or
                        // pending) at its start. The shared profile starts idle: every card of a node keeps its
                        // series in the first minutes (an exporter before 4.8.2 drops idle cards only while
                        // another is busy), so the cards are seen from the first hour.
                        free_at: if shared_profile {
                            sec(b.grid.start_ms + 2 * MIN_MS + before / 36)
                        } else {
                            sec(b.grid.start_ms - before)
                        },
                        budget,
                        holds: Vec::new(),
                    }
                })
                .collect();
            let uuid = b.uuid(i, card);
            b.emitters.push(Emitter { node: i, gpu: card, uuid, kind, lanes, segs: Vec::new() });
        };
        match ty {
            NodeType::MigA100 | NodeType::MigMixedA30 => {
                for &(card, profile, gi_id) in ty.mig_layout() {
                    push(self, &mut rng, card, EmitterKind::MigInstance { profile, gi_id }, &[0]);
                }
                for card in MIG_WHOLE_CARDS {
                    push(self, &mut rng, card, EmitterKind::Whole, &[0]);
                }
            }
            _ if ty.replicas() > 0 => {
                let lanes = vec![0; ty.replicas() as usize];
                for card in 0..GPUS_PER_NODE {
                    push(self, &mut rng, card, EmitterKind::TimeSlice, &lanes);
                }
            }
            _ if ty.mig_single().is_some() => {
                let (profile, _) = ty.mig_single().unwrap_or((MIG_3G, MIG_SLICES));
                for card in 0..GPUS_PER_NODE {
                    for gi in 0..MIG_SINGLE_PER_CARD {
                        push(self, &mut rng, card, EmitterKind::MigInstance { profile, gi_id: 1 + gi }, &[0]);
                    }
                }
            }
            NodeType::HamiA100 | NodeType::HamiWholeA100 => {
                for card in 0..GPUS_PER_NODE {
                    let layout = HAMI_LANE_LAYOUTS[rng.random_range(0..HAMI_LANE_LAYOUTS.len())];
                    push(self, &mut rng, card, EmitterKind::Hami, layout);
                }
            }
            _ => {
                for card in 0..GPUS_PER_NODE {
                    push(self, &mut rng, card, EmitterKind::Whole, &[0]);
                }
            }
        }
        self.nodes.push(Node {
            name: format!("gpu-{}-{:02}", ty.slug(), i),
            ty,
            offset_ms,
            emitters: first..self.emitters.len(),
            gaps_k: Vec::new(),
            gaps_t: Vec::new(),
            nan_emitter: None,
            nan_ks: Vec::new(),
        });
    }

    /// At least one squatter per 64 GPUs, on whole-card nodes that have DCGM (so the ingest can
    /// see the memory they hold), spread over nodes and cards.
    fn place_squatters(&mut self, gpus: u32) {
        let cands: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| matches!(self.nodes[i].ty, NodeType::WholeA100 | NodeType::WholeH100 | NodeType::WholeL40S))
            .collect();
        let n = (gpus / 64).max(1) as usize;
        for j in 0..n.min(cands.len() * GPUS_PER_NODE as usize) {
            let node = cands[j % cands.len()];
            let card = GPUS_PER_NODE as usize - 1 - (j / cands.len());
            let lane = LaneRef { emitter: self.nodes[node].emitters.start + card, lane: 0 };
            let mut rng = self.rng(j as u64, SALT_SQUAT);
            let t0 = sec(self.grid.start_ms - rng.int(2 * DAY_MS, 5 * DAY_MS));
            self.spawn(&mut rng, node, &[lane], t0, Class::Squatter, GroupKind::Whole, None, false);
        }
    }

    fn fill_node(&mut self, i: usize) {
        let mut rng = self.rng(i as u64, SALT_FILL);
        let ty = self.nodes[i].ty;
        let lanes_of = |b: &Builder, pred: &dyn Fn(&EmitterKind) -> bool| -> Vec<LaneRef> {
            b.nodes[i]
                .emitters
                .clone()
                .filter(|&e| pred(&b.emitters[e].kind))
                .flat_map(|e| (0..b.emitters[e].lanes.len()).map(move |l| LaneRef { emitter: e, lane: l as u8 }))
                .collect()
        };
        match ty {
            NodeType::MigA100 | NodeType::MigMixedA30 => {
                let whole = lanes_of(self, &|k| *k == EmitterKind::Whole);
                self.fill(&mut rng, i, &whole, GroupKind::Whole, Constraint::Any);
                let profiles = if ty == NodeType::MigA100 {
                    [MIG_1G, MIG_2G, MIG_3G, MIG_7G]
                } else {
                    [MIG_1G_A30, MIG_2G_A30, MIG_4G_A30, MIG_4G_A30]
                };
                for (n, p) in profiles.into_iter().enumerate() {
                    if profiles[..n].contains(&p) {
                        continue;
                    }
                    let group =
                        lanes_of(self, &|k| matches!(k, EmitterKind::MigInstance { profile, .. } if *profile == p));
                    self.fill(&mut rng, i, &group, GroupKind::Mig(p), Constraint::Any);
                }
            }
            _ if ty.replicas() > 0 => {
                let mut all = lanes_of(self, &|_| true);
                if self.profile == Profile::Exactness && ty == NodeType::TsPlainL40S {
                    // one card idle throughout while the others are busy: dcgm-exporter before 4.8.2 never shows it
                    let last = self.nodes[i].emitters.end - 1;
                    all.retain(|r| r.emitter != last);
                }
                self.fill(&mut rng, i, &all, GroupKind::TimeSlice, Constraint::SameCard);
            }
            _ if ty.mig_single().is_some() => {
                let (profile, _) = ty.mig_single().unwrap_or((MIG_3G, MIG_SLICES));
                let all = lanes_of(self, &|_| true);
                self.fill(&mut rng, i, &all, GroupKind::Mig(profile), Constraint::Any);
            }
            NodeType::HamiA100 | NodeType::HamiWholeA100 => {
                let all = lanes_of(self, &|_| true);
                self.fill(&mut rng, i, &all, GroupKind::Hami, Constraint::DistinctCards);
            }
            _ => {
                let all = lanes_of(self, &|_| true);
                self.fill(&mut rng, i, &all, GroupKind::Whole, Constraint::Any);
            }
        }
    }

    /// Up to `q` lanes of `group` that can be taken together, preferring the earliest free.
    fn pick_lanes(&self, group: &[LaneRef], q: usize, cons: Constraint) -> Vec<LaneRef> {
        let mut c: Vec<(i64, LaneRef)> = group.iter().map(|r| (self.lane(*r).free_at, *r)).collect();
        c.sort_by_key(|(t, r)| (*t, r.emitter, r.lane));
        match cons {
            Constraint::Any => c.iter().take(q).map(|x| x.1).collect(),
            Constraint::DistinctCards => {
                let mut out: Vec<LaneRef> = Vec::with_capacity(q);
                for (_, r) in &c {
                    if out.len() == q {
                        break;
                    }
                    if !out.iter().any(|o| o.emitter == r.emitter) {
                        out.push(*r);
                    }
                }
                out
            }
            Constraint::WholeCard => {
                // the card whose lanes are all free first
                let mut cards: Vec<usize> = c.iter().map(|x| x.1.emitter).collect();
                cards.sort_unstable();
                cards.dedup();
                let lanes_of = |e: usize| c.iter().filter(move |x| x.1.emitter == e);
                cards
                    .into_iter()
                    .min_by_key(|e| (lanes_of(*e).map(|x| x.0).max().unwrap_or(i64::MAX), *e))
                    .map(|e| lanes_of(e).map(|x| x.1).collect())
                    .unwrap_or_default()
            }
            Constraint::SameCard => {
                let mut best: Option<(i64, Vec<LaneRef>)> = None;
                let mut seen: Vec<usize> = Vec::new();
                for (_, r) in &c {
                    if seen.contains(&r.emitter) {
                        continue;
                    }
                    seen.push(r.emitter);
                    let lanes: Vec<(i64, LaneRef)> =
                        c.iter().filter(|x| x.1.emitter == r.emitter).take(q).copied().collect();
                    if lanes.len() == q {
                        let t = lanes[q - 1].0;
                        if best.as_ref().is_none_or(|b| t < b.0) {
                            best = Some((t, lanes.iter().map(|x| x.1).collect()));
                        }
                    }
                }
                best.map(|b| b.1).unwrap_or_else(|| c.iter().take(1).map(|x| x.1).collect())
            }
        }
    }

    /// Pack pods onto a lane group from the earliest free lane until the window's end.
    fn fill(&mut self, rng: &mut ChaCha8Rng, node: usize, group: &[LaneRef], gk: GroupKind, cons: Constraint) {
        if group.is_empty() {
            return;
        }
        let (start, end) = (self.grid.start_ms, self.grid.end_ms);
        loop {
            let earliest = group.iter().map(|r| self.lane(*r).free_at).min().unwrap_or(end);
            if earliest >= end {
                break;
            }
            // on the HAMi node with whole-card requests, one container in four asks for nvidia_com_gpu alone
            let whole = self.nodes[node].ty == NodeType::HamiWholeA100 && rng.random_bool(0.25);
            let (gk, cons) = if whole { (GroupKind::HamiWhole, Constraint::WholeCard) } else { (gk, cons) };
            let class = pick_class(rng, gk);
            let q = pick_q(rng, class, gk).min(group.len());
            let lanes = self.pick_lanes(group, q, cons);
            let t_free = lanes.iter().map(|r| self.lane(*r).free_at).max().unwrap_or(end);
            let idle = if rng.random_bool(0.15) { rng.int(10 * MIN_MS, 3 * HOUR_MS) } else { rng.int(0, 10 * MIN_MS) };
            let t0 = sec(t_free + idle);
            if t0 >= end {
                for r in &lanes {
                    let l = self.lane_mut(*r);
                    l.free_at = l.free_at.max(t0);
                }
                continue;
            }
            let force = self.force_restart && node == 0 && t0 >= start && t0 + 3 * HOUR_MS < end;
            if force {
                self.force_restart = false;
            }
            let mut prev = self.spawn(rng, node, &lanes, t0, class, gk, None, force);
            // A failed pod may come back later under the same name with a new uid, once the
            // old pod object is deleted (two pods of one name never coexist).
            for attempt in 0..2 {
                let old = &self.pods[prev];
                if !old.failed || !((force && attempt == 0) || rng.random_bool(0.6)) {
                    break;
                }
                let not_before = old.t3 + rng.int(0, 15 * MIN_MS);
                let lanes = self.pick_lanes(group, old.devices.len(), cons);
                let t_free = lanes.iter().map(|r| self.lane(*r).free_at).max().unwrap_or(end);
                let t0 = sec(t_free.max(not_before));
                if t0 >= end || lanes.len() != self.pods[prev].devices.len() {
                    break;
                }
                prev = self.spawn(rng, node, &lanes, t0, class, gk, Some(prev), false);
            }
        }
    }

    fn new_name(&mut self, stem: &str) -> usize {
        // An odd multiplier makes this a bijection on 24 bits: names never collide.
        let n = self.names.len() as u64;
        let id = n.wrapping_mul(0x9E37_79B1).wrapping_add(self.name_salt) & 0xff_ffff;
        self.names.push(format!("{stem}-{id:06x}"));
        self.names.len() - 1
    }

    fn new_uid(rng: &mut ChaCha8Rng) -> String {
        let a: u64 = rng.random();
        let b: u64 = rng.random();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48 & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// Create a pod on `lanes` (created at `t0`) and mark the lanes busy while it runs.
    /// `restart_of` reuses that pod's name and request; `force_fail` makes it fail early.
    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        rng: &mut ChaCha8Rng,
        node: usize,
        lanes: &[LaneRef],
        t0: i64,
        class: Class,
        gk: GroupKind,
        restart_of: Option<usize>,
        force_fail: bool,
    ) -> usize {
        let ty = self.nodes[node].ty;
        let end = self.grid.end_ms;
        let mut pod = match restart_of {
            Some(p) => {
                let old = self.pods[p].clone();
                Pod { uid: String::new(), devices: Vec::new(), ..old }
            }
            None => self.draw_pod(rng, node, lanes, class, gk, ty),
        };
        pod.uid = Self::new_uid(rng);
        pod.seed = rng.random();
        pod.devices = lanes.to_vec();
        pod.t0 = t0;
        let pending = match rng.u() {
            x if x < 0.5 => rng.int(1_000, MIN_MS),
            x if x < 0.85 => rng.int(MIN_MS, 10 * MIN_MS),
            _ => rng.int(10 * MIN_MS, 30 * MIN_MS),
        };
        pod.t1 = sec(t0 + pending);
        let mut dur = class.duration_ms(rng);
        pod.failed = force_fail || rng.random_bool(class.p_fail());
        if force_fail {
            dur = rng.int(5 * MIN_MS, 30 * MIN_MS);
        } else if pod.failed {
            dur = (dur as f64 * rng.range(0.1, 0.9)) as i64;
        }
        if class == Class::Squatter {
            // Squatters hold their card through the whole window and beyond.
            dur = end - pod.t1 + 10 * DAY_MS;
        }
        if self.profile == Profile::Exactness && class != Class::Squatter && rng.random_bool(0.08) {
            // shorter than a scrape interval: seen by one KSM scrape or none, by one utilization sample or none
            dur = rng.int(1_000, 40_000);
        } else {
            dur = dur.max(MIN_MS);
        }
        pod.t2 = sec(pod.t1 + dur).max(pod.t1 + 1_000);
        let linger = if force_fail { rng.int(10 * MIN_MS, 20 * MIN_MS) } else { rng.int(10 * MIN_MS, 120 * MIN_MS) };
        pod.t3 = sec(pod.t2 + linger);
        let idx = self.pods.len();
        for (dev, r) in lanes.iter().enumerate() {
            let release = rng.int(5_000, 90_000);
            let (t1, t2) = (pod.t1, pod.t2);
            let lane = self.lane_mut(*r);
            lane.holds.push(Hold { pod: idx, dev: dev as u8, t1, t2 });
            lane.free_at = sec(t2 + release);
        }
        self.pods.push(pod);
        idx
    }

    /// Draw a new pod's identity and request (times are set by `spawn`).
    fn draw_pod(
        &mut self,
        rng: &mut ChaCha8Rng,
        node: usize,
        lanes: &[LaneRef],
        class: Class,
        gk: GroupKind,
        ty: NodeType,
    ) -> Pod {
        let ns = class.pick_namespace(rng);
        let (stem, container) = class.names(rng);
        let name_id = self.new_name(stem);
        let pattern = class.pattern(rng);
        let frac = class.fb_frac(rng);
        let q = if gk == GroupKind::HamiWhole { 1 } else { lanes.len() as u32 };
        let card_mem = ty.card_mem_mib() as f64;
        let mut pod = Pod {
            ns,
            name_id,
            uid: String::new(),
            container,
            node,
            t0: 0,
            t1: 0,
            t2: 0,
            t3: 0,
            failed: false,
            kind: Kind::Whole,
            resource: "nvidia_com_gpu",
            q,
            f: 1.0,
            cores: 0,
            gpumem_mib: 0,
            devices: Vec::new(),
            class,
            pattern,
            scale: 1.0,
            seed: 0,
            fb_base_mib: card_mem * frac,
            fb_cap_mib: card_mem,
            squatter: class == Class::Squatter,
        };
        match gk {
            GroupKind::Whole if class == Class::Squatter => {
                let hi = 71_680.0f64.min(card_mem - 2048.0);
                pod.fb_base_mib = rng.range(20_480.0, hi);
            }
            GroupKind::Whole => {}
            GroupKind::Mig(p) => {
                pod.kind = Kind::Mig(p);
                // under the single strategy a MIG instance is a plain nvidia_com_gpu
                let (resource, slices) = match ty.mig_single() {
                    Some((_, slices)) => ("nvidia_com_gpu", slices),
                    None => (p.resource, ty.mig_slices()),
                };
                pod.resource = resource;
                pod.f = p.g as f64 / slices as f64;
                pod.fb_base_mib = p.mem_mib as f64 * frac;
                pod.fb_cap_mib = p.mem_mib as f64;
            }
            GroupKind::TimeSlice => {
                let replicas = ty.replicas().max(1);
                pod.kind = if ty == NodeType::MpsL40S { Kind::Mps } else { Kind::TimeSlice };
                pod.resource = ty.shared_resource();
                pod.f = 1.0 / replicas as f64;
                // Time-slicing does not isolate: a pod may use more or less than its share. MPS caps it.
                let over = rng.range(0.5, 2.0);
                pod.scale = q as f64 * pod.f * if pod.kind == Kind::Mps { over.min(1.0) } else { over };
                pod.fb_base_mib = q as f64 * card_mem / replicas as f64 * frac;
            }
            GroupKind::HamiWhole => {
                // HAMi's default for a container without gpucores / gpumem: the whole card
                pod.kind = Kind::Whole;
                pod.resource = "nvidia_com_gpu";
            }
            GroupKind::Hami => {
                let budget = lanes.iter().map(|r| self.lane(*r).budget).min().unwrap_or(20).max(20);
                let cores = 5 * rng.int(4, budget as i64 / 5 + 1) as u32;
                pod.kind = Kind::Hami;
                // Reported like the ingest stores HAMi rows: under the vGPU request.
                pod.resource = "nvidia_com_gpu";
                pod.cores = cores;
                pod.f = cores as f64 / 100.0;
                // Some pods burst above their gpucores (HAMi's core limit is soft).
                let burst = if rng.random_bool(0.3) { rng.range(1.3, 2.2) } else { 1.0 };
                pod.scale = pod.f * burst;
                let mem = (cores as f64 / 100.0 * card_mem * rng.range(0.5, 1.0) / 256.0).floor() * 256.0;
                pod.gpumem_mib = mem.max(256.0) as u32;
                pod.fb_base_mib = pod.gpumem_mib as f64 * frac;
                pod.fb_cap_mib = pod.gpumem_mib as f64;
            }
        }
        pod
    }

    /// One pod per simulated day in `sandbox` requesting `example_com_gpu` = 1.
    fn unknown_pods(&mut self) {
        let (start, end) = (self.grid.start_ms, self.grid.end_ms);
        for d in 0..self.days() {
            let mut rng = self.rng(d as u64, SALT_UNKNOWN);
            let day_start = start + d * DAY_MS;
            let span = DAY_MS.min(end - day_start);
            let t0 = sec(day_start + rng.int(0, span / 2));
            let t1 = sec(t0 + rng.int(5_000, 120_000));
            let t2 = sec(t1 + rng.int(30 * MIN_MS, 3 * HOUR_MS));
            let t3 = sec(t2 + rng.int(10 * MIN_MS, 60 * MIN_MS));
            let name_id = self.new_name("gpu-probe");
            let pod = Pod {
                ns: NS_SANDBOX,
                name_id,
                uid: Self::new_uid(&mut rng),
                container: "probe",
                node: d as usize % self.nodes.len(),
                t0,
                t1,
                t2,
                t3,
                failed: false,
                kind: Kind::Unknown,
                resource: "example_com_gpu",
                q: 1,
                f: 0.0,
                cores: 0,
                gpumem_mib: 0,
                devices: Vec::new(),
                class: Class::ShortJob,
                pattern: Pattern::Steady { base: 0.0 },
                scale: 0.0,
                seed: 0,
                fb_base_mib: 0.0,
                fb_cap_mib: 0.0,
                squatter: false,
            };
            self.pods.push(pod);
        }
    }

    /// H100 nodes: a 40-minute exporter gap per day. A100 nodes: SM_ACTIVE of gpu 0 is NaN at
    /// 3 grid points per day where a running pod holds it.
    fn anomalies(&mut self) {
        let (start, end) = (self.grid.start_ms, self.grid.end_ms);
        let days = self.days();
        for i in 0..self.nodes.len() {
            let mut rng = self.rng(i as u64, SALT_ANOMALY);
            let off = self.nodes[i].offset_ms;
            match self.nodes[i].ty {
                NodeType::WholeH100 => {
                    for d in 0..days {
                        // Inside the window also on a last, partial day.
                        let day_start = start + d * DAY_MS;
                        let span = (DAY_MS.min(end - day_start) - 40 * MIN_MS).max(1);
                        let gs = sec(day_start + rng.int(0, span));
                        let ge = gs + 40 * MIN_MS;
                        if gs >= end {
                            continue;
                        }
                        self.nodes[i].gaps_t.push((gs, ge));
                        let (ka, kb) = self.util.range(gs, ge, off);
                        if ka < kb {
                            self.nodes[i].gaps_k.push((ka, kb));
                        }
                    }
                }
                NodeType::WholeA100 => {
                    let e = self.nodes[i].emitters.start;
                    let mut all = Vec::new();
                    for d in 0..days {
                        let ds = start + d * DAY_MS;
                        let (da, db) = self.util.range(ds, ds + DAY_MS, 0);
                        let mut cands = self.nan_candidates(e, da, db);
                        let n = cands.len().min(3);
                        for j in 0..n {
                            let pick = rng.int(j as i64, cands.len() as i64) as usize;
                            cands.swap(j, pick);
                        }
                        all.extend_from_slice(&cands[..n]);
                    }
                    all.sort_unstable();
                    self.nodes[i].nan_emitter = Some(e);
                    self.nodes[i].nan_ks = all;
                }
                _ => {}
            }
        }
    }

    /// Sample indices in `[da, db)` where emitter `e` is held by a pod that is Running at the
    /// grid point, with the same holder one sample before and after inside the same hour (so
    /// SM_ACTIVE stays the device's source in every hour window).
    fn nan_candidates(&self, e: usize, da: u64, db: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for seg in &self.emitters[e].segs {
            let Some(h) = seg.holders.first() else { continue };
            let lo = (seg.ka + 1).max(da);
            let hi = seg.kb.saturating_sub(1).min(db);
            for k in lo..hi {
                if self.pods[h.pod].running_at(self.util.at(k)) && self.util.hour_of(k - 1) == self.util.hour_of(k + 1)
                {
                    out.push(k);
                }
            }
        }
        out
    }
}

fn pick_class(rng: &mut ChaCha8Rng, gk: GroupKind) -> Class {
    const CLASSES: [Class; 4] = [Class::Train, Class::ShortJob, Class::Inference, Class::Dev];
    let w: [f64; 4] = match gk {
        GroupKind::Whole => [0.35, 0.3, 0.2, 0.15],
        GroupKind::Mig(p) if p == MIG_1G => [0.0, 0.25, 0.4, 0.35],
        GroupKind::Mig(p) if p == MIG_2G => [0.1, 0.3, 0.3, 0.3],
        GroupKind::Mig(p) if p == MIG_3G => [0.5, 0.2, 0.3, 0.0],
        GroupKind::Mig(_) => [0.6, 0.0, 0.4, 0.0],
        GroupKind::TimeSlice => [0.0, 0.25, 0.4, 0.35],
        GroupKind::Hami => [0.0, 0.25, 0.45, 0.3],
        GroupKind::HamiWhole => [0.3, 0.3, 0.4, 0.0],
    };
    CLASSES[rng.weighted(&w)]
}

fn pick_q(rng: &mut ChaCha8Rng, class: Class, gk: GroupKind) -> usize {
    match gk {
        GroupKind::Whole => match class {
            Class::Train => [1, 2, 4, 8][rng.weighted(&[0.3, 0.25, 0.3, 0.15])],
            Class::ShortJob => [1, 2][rng.weighted(&[0.7, 0.3])],
            Class::Inference => [1, 2][rng.weighted(&[0.8, 0.2])],
            _ => 1,
        },
        GroupKind::Mig(p) if p == MIG_1G => [1, 2][rng.weighted(&[0.8, 0.2])],
        GroupKind::Mig(_) => 1,
        GroupKind::TimeSlice => [1, 2][rng.weighted(&[0.7, 0.3])],
        GroupKind::Hami => [1, 2][rng.weighted(&[0.85, 0.15])],
        GroupKind::HamiWhole => 1,
    }
}
