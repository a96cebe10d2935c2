//! `PMI_process_mapping`: which ranks share a node.
//!
//! The value is `(vector,(start,nodes,ranks_per_node),...)`: each triple says that `nodes`
//! consecutive nodes starting at node `start` each get `ranks_per_node` consecutive ranks. When
//! the triples cover fewer ranks than the job has, they repeat (a cyclic mapping), as MPICH reads
//! them. `(vector,(0,2,2))` is ranks 0,1 on node 0 and ranks 2,3 on node 1.

/// Node id of every rank, from a `PMI_process_mapping` value, for a job of `size` ranks.
///
/// ```
/// use viaduct_pmi::mapping::node_ids;
///
/// // Two nodes of two ranks each.
/// assert_eq!(node_ids("(vector,(0,2,2))", 4).unwrap(), [0, 0, 1, 1]);
/// assert!(node_ids("(list,0)", 4).is_err());
/// ```
pub fn node_ids(value: &str, size: u32) -> Result<Vec<u32>, String> {
    let text: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = text
        .strip_prefix("(vector,")
        .and_then(|t| t.strip_suffix(')'))
        .ok_or("expected (vector,(start,nodes,ranks),...)")?;
    let mut blocks = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let body = rest
            .strip_prefix('(')
            .ok_or_else(|| format!("expected '(' at {rest:?}"))?;
        let end = body
            .find(')')
            .ok_or_else(|| format!("unclosed triple at {rest:?}"))?;
        let nums = body[..end]
            .split(',')
            .map(|n| {
                n.parse::<u32>()
                    .map_err(|_| format!("{n:?} is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let [start, nodes, per_node] = nums[..] else {
            return Err(format!(
                "triple ({}) does not have three numbers",
                &body[..end]
            ));
        };
        if nodes == 0 || per_node == 0 {
            return Err(format!("triple ({}) maps no rank", &body[..end]));
        }
        blocks.push((start, nodes, per_node));
        rest = &body[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    if blocks.is_empty() {
        return Err("the vector holds no triple".into());
    }
    let size = size as usize;
    let mut ids = Vec::with_capacity(size);
    'outer: loop {
        for &(start, nodes, per_node) in &blocks {
            for node in 0..nodes {
                let node_id = start.checked_add(node).ok_or("node id overflows")?;
                for _ in 0..per_node {
                    if ids.len() == size {
                        break 'outer;
                    }
                    ids.push(node_id);
                }
            }
        }
        if ids.len() == size {
            break;
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_and_cyclic_mappings() {
        assert_eq!(node_ids("(vector,(0,1,4))", 4).unwrap(), vec![0, 0, 0, 0]);
        assert_eq!(node_ids("(vector,(0,2,2))", 4).unwrap(), vec![0, 0, 1, 1]);
        // Cyclic: one rank per node, repeated.
        assert_eq!(node_ids("(vector,(0,2,1))", 4).unwrap(), vec![0, 1, 0, 1]);
        assert_eq!(
            node_ids("(vector, (0,1,3), (1,1,1))", 4).unwrap(),
            vec![0, 0, 0, 1]
        );
        // A mapping covering more ranks than the job has is cut.
        assert_eq!(node_ids("(vector,(0,4,4))", 2).unwrap(), vec![0, 0]);
    }

    #[test]
    fn malformed_mappings_are_errors() {
        for bad in [
            "",
            "(vector)",
            "(vector,)",
            "vector,(0,1,4)",
            "(vector,(0,1))",
            "(vector,(0,1,4,5))",
            "(vector,(0,x,4))",
            "(vector,(0,0,4))",
            "(vector,(0,1,0))",
            "(vector,(0,1,4)",
            "(vector,0,1,4)",
        ] {
            assert!(node_ids(bad, 4).is_err(), "{bad:?} was accepted");
        }
    }
}
