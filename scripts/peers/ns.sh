# Sourced by the peers' scripts: a network namespace with one veth address, for servers that
# refuse loopback. Traffic stays inside the namespace.
# ns_up NS IP HOST_VETH NS_VETH | ns_down NS HOST_VETH
ns_up() {
  ip netns add "$1" 2>/dev/null || true
  ip link add "$3" type veth peer name "$4" 2>/dev/null || true
  ip link set "$4" netns "$1" 2>/dev/null || true
  ip netns exec "$1" ip addr replace "$2/24" dev "$4"
  ip netns exec "$1" ip link set "$4" up
  ip netns exec "$1" ip link set lo up
}
ns_down() {
  ip netns del "$1" 2>/dev/null || true
  ip link del "$2" 2>/dev/null || true
}
