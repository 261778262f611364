//! Cluster fragmentation (SPEC §7): free cards scattered over nodes cannot take a large job. Per node the free
//! cards of an hour, and for the cluster the largest block of free whole cards on one node against all free cards.
//! Pure.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct NodeFree {
    pub cluster: String,
    pub node: String,
    pub gpu_model: String,
    pub cards: f64,
    /// Cards held on average over the hour.
    pub allocated_cards: f64,
    /// cards − allocated (never below 0: time-slicing can oversell).
    pub free_cards: f64,
    /// Whole cards free on this node: the largest job it could take.
    pub free_whole_cards: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Fragmentation {
    pub nodes: Vec<NodeFree>,
    pub free_cards: f64,
    /// The largest number of whole cards free on one node.
    pub largest_free_block: u32,
    /// 1 − largest block ÷ free cards: 0 when all free capacity sits on one node, towards 1 when it is scattered.
    pub fragmentation: Option<f64>,
}

/// `(cluster, node, model, cards, allocated card-seconds)` of one hour.
pub type NodeHourSums = (String, String, String, f64, f64);

pub fn fragmentation(nodes: &[NodeHourSums]) -> Fragmentation {
    let nodes: Vec<NodeFree> = nodes
        .iter()
        .map(|(cluster, node, model, cards, allocated_s)| {
            let allocated = allocated_s / 3600.0;
            let free = (cards - allocated).max(0.0);
            NodeFree {
                cluster: cluster.clone(),
                node: node.clone(),
                gpu_model: model.clone(),
                cards: *cards,
                allocated_cards: allocated,
                free_cards: free,
                // a hair of rounding must not lose a whole card
                free_whole_cards: (free + 1e-9).floor() as u32,
            }
        })
        .collect();
    let free_cards: f64 = nodes.iter().map(|n| n.free_cards).sum();
    let largest_free_block = nodes.iter().map(|n| n.free_whole_cards).max().unwrap_or(0);
    Fragmentation {
        fragmentation: (free_cards >= 1.0).then(|| 1.0 - f64::from(largest_free_block) / free_cards),
        nodes,
        free_cards,
        largest_free_block,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(node: &str, cards: f64, allocated_cards: f64) -> NodeHourSums {
        ("c".into(), node.into(), "A100".into(), cards, allocated_cards * 3600.0)
    }

    #[test]
    fn scattered_free_cards_are_fragmented() {
        // 3 + 2 + 3 free cards, but no node can take a 4-card job
        let f = fragmentation(&[n("a", 8.0, 5.0), n("b", 8.0, 6.0), n("c", 8.0, 5.0)]);
        assert_eq!(f.free_cards, 8.0);
        assert_eq!(f.largest_free_block, 3);
        assert_eq!(f.fragmentation, Some(1.0 - 3.0 / 8.0));
        // one node with all 8 free: not fragmented
        let g = fragmentation(&[n("a", 8.0, 0.0), n("b", 8.0, 8.0)]);
        assert_eq!((g.largest_free_block, g.fragmentation), (8, Some(0.0)));
        // a half-used card is not a free whole card; oversold nodes have 0 free
        let h = fragmentation(&[n("a", 8.0, 7.5), n("b", 8.0, 9.0)]);
        assert_eq!((h.free_cards, h.largest_free_block, h.fragmentation), (0.5, 0, None));
    }
}
