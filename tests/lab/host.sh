#!/usr/bin/env bash
# Lab SSH hosts: each is a network namespace on the lab bridge plus UTS, PID
# and mount namespaces, running Debian's stock sshd with its own host key and
# config, private directories for everything a join script writes, and
# stand-ins for systemctl, kubelet (hollow node), nproc, uname and
# /proc/meminfo. See tests/lab/README.md.
#
# Usage: host.sh add <i> [--cpu N] [--mem-mib N] [--arch x86_64|aarch64]
#                        [--user NAME] [--max-pods N]
#        host.sh stop|start|reboot|cut|heal|slow|fast|rekey|del <i>
#                     slow: traffic to host i limited to 32 kbit/s (a congested
#                     or failing link); fast: the limit lifted
#        host.sh verified <i> --shim FILE --allowed-signers FILE [--user NAME]
#                     apply the verified-execution host recipe (docs/verified-execution.md)
#                     to host i: login user NAME (default kpssh) pinned to the shim
#        host.sh exec <i> CMD...      run CMD as root inside host i
#        host.sh list | known-hosts | del-all
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    sed -n '/^# Usage:/,/^# *host.sh list/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_index() {
    if ! [[ ${1:-} =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > 200)); then
        die "host index must be 1..200, got '${1:-}'"
    fi
}

# The process that owns the host's namespaces (ip netns exec -> unshare).
host_pidfile() { echo "$(host_dir "$1")/state/host.pid"; }
# PID (in our namespace) of the host's PID 1 (hostinit.sh).
host_init_pid() {
    local f p
    f=$(host_pidfile "$1")
    pid_alive "$f" || return 1
    p=$(<"$f")
    p=$(awk '{print $1}' "/proc/$p/task/$p/children" 2>/dev/null)
    [[ -n $p ]] || return 1
    echo "$p"
}
host_running() { host_init_pid "$1" >/dev/null; }

write_known_hosts() {
    local f=$LAB_DIR/known_hosts h
    : >"$f.tmp"
    for h in "$LAB_DIR"/hosts/h*/host.env; do
        [[ -e $h ]] || continue
        (
            # shellcheck disable=SC1090
            . "$h"
            printf '%s %s\n' "$HOST_IP" "$(cut -d' ' -f1,2 "$HOST_KEY_PUB")"
        ) >>"$f.tmp"
    done
    mv "$f.tmp" "$f"
}

cmd_add() {
    local i=$1 cpu=2 mem=4096 arch=x86_64 user=lab maxpods=110
    shift
    while (($#)); do
        case $1 in
        --cpu) cpu=$2 ;;
        --mem-mib) mem=$2 ;;
        --arch) arch=$2 ;;
        --user) user=$2 ;;
        --max-pods) maxpods=$2 ;;
        *) die "add: unknown option $1" ;;
        esac
        shift 2
    done
    [[ $cpu =~ ^[0-9]+$ && $cpu -ge 1 ]] || die "--cpu must be a positive integer"
    [[ $mem =~ ^[0-9]+$ && $mem -ge 64 ]] || die "--mem-mib must be >= 64"
    [[ $maxpods =~ ^[0-9]+$ ]] || die "--max-pods must be an integer"
    [[ $user =~ ^[a-z_][a-z0-9_-]*$ && $user != root ]] || die "--user must be a plain non-root user name"
    local goarch
    case $arch in
    x86_64 | amd64) arch=x86_64 goarch=amd64 ;;
    aarch64 | arm64) arch=aarch64 goarch=arm64 ;;
    *) die "--arch must be x86_64 or aarch64" ;;
    esac
    [[ -e $LAB_DIR/env.sh ]] || die "lab $LAB_ID is not up (no $LAB_DIR/env.sh); run tests/lab/up.sh"
    ip link show "$LAB_BRIDGE" >/dev/null 2>&1 || die "bridge $LAB_BRIDGE missing; run tests/lab/up.sh"
    need_bins hollow-node
    local H ns veth ip name
    H=$(host_dir "$i") ns=$(host_ns "$i") veth=$(host_veth "$i") ip=$(host_ip "$i") name=$(host_name "$i")
    [[ ! -e $H/host.env ]] || die "host $i already exists ($H); use host.sh del $i first"
    log "adding host $i: $name $ip cpu=$cpu mem=${mem}MiB arch=$arch user=$user"

    mkdir -p "$H"/{fs,files,shims,ssh,state/systemd,state/run,logs}
    local d
    for d in etc/kubernetes var/lib/kubelet etc/kpssh usr/local/bin etc/systemd/system opt/cni opt/kpssh \
        var/lib/kpssh etc/default etc/sudoers.d home root; do
        mkdir -p "$H/fs/${d//\//-}"
        # Mount points must exist in the real tree; create empty ones if absent.
        [[ -d /$d ]] || mkdir -p "/$d"
    done
    # root's home is private too, and empty: the build machine's own shell start-up files
    # (a pyenv init in ~/.bashrc, say) would otherwise run on every root login to the host.
    chmod 700 "$H/fs/root"
    cp -a /etc/default/. "$H/fs/etc-default/"
    cp -a /etc/sudoers.d/. "$H/fs/etc-sudoers.d/"
    printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$user" >"$H/fs/etc-sudoers.d/kpssh-lab"
    chmod 440 "$H/fs/etc-sudoers.d/kpssh-lab"

    cat >"$H/host.env" <<EOF
HOST_INDEX=$i
HOST_NAME=$name
HOST_IP=$ip
HOST_NETNS=$ns
HOST_VETH=$veth
HOST_USER=$user
HOST_CPU=$cpu
HOST_MEM_MIB=$mem
HOST_ARCH=$arch
HOST_GOARCH=$goarch
HOST_MAX_PODS=$maxpods
HOST_DIR=$H
HOST_BIN=$LAB_BIN
HOST_KEY_PUB=$H/ssh/ssh_host_ed25519_key.pub
HOST_FS=$H/fs
EOF

    # No DNS: the machine's resolver may point outside (an address the lab must never send to),
    # and a name missing from /etc/hosts would then wait for its timeout. A resolver on the
    # host's own loopback, where nothing listens, fails at once.
    printf '# kpssh lab host: no DNS; names come from /etc/hosts\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n' \
        >"$H/files/etc-resolv.conf"

    # Users: private passwd/group/shadow with the non-root user added.
    local uid=$((4000 + i))
    cp /etc/passwd "$H/files/etc-passwd"
    cp /etc/group "$H/files/etc-group"
    cp -p /etc/shadow "$H/files/etc-shadow"
    grep -v "^$user:" "$H/files/etc-passwd" >"$H/files/etc-passwd.new" || true
    printf '%s:x:%d:%d:kpssh lab user:/home/%s:/bin/bash\n' "$user" "$uid" "$uid" "$user" >>"$H/files/etc-passwd.new"
    mv "$H/files/etc-passwd.new" "$H/files/etc-passwd"
    printf '%s:x:%d:\n' "$user" "$uid" >>"$H/files/etc-group"
    # '*' = no password, not locked (sshd with UsePAM=no refuses locked accounts).
    sed -i "/^$user:/d; s/^root:[!]*[^:]*:/root:*:/" "$H/files/etc-shadow"
    printf '%s:*:20000:0:99999:7:::\n' "$user" >>"$H/files/etc-shadow"
    chmod 644 "$H/files/etc-passwd" "$H/files/etc-group"
    mkdir -p "$H/fs/home/$user"
    chown "$uid:$uid" "$H/fs/home/$user"
    printf '%s\n' "$name" >"$H/files/etc-hostname"
    cat >"$H/files/etc-hosts" <<EOF
127.0.0.1 localhost
$ip $name
$LAB_GW kpssh-lab-gateway
EOF

    # What probes see.
    awk -v kb=$((mem * 1024)) '
        /^MemTotal:/ {printf "MemTotal:       %8d kB\n", kb; next}
        /^(MemFree|MemAvailable):/ {printf "%-16s%8d kB\n", $1, kb * 0.9; next}
        {print}' /proc/meminfo >"$H/files/proc-meminfo"
    local s
    for s in kubelet systemctl nproc uname; do
        sed "s|@HOST_DIR@|$H|g" "$LAB_SCRIPT_DIR/shims/$s" >"$H/shims/$s"
        chmod 755 "$H/shims/$s"
    done
    cp /usr/bin/uname "$H/shims/uname.real"
    ln -sf uname "$H/shims/arch"
    cp "$H/shims/kubelet" "$H/shims/systemctl" "$H/fs/usr-local-bin/"

    # SSH: own host key, own config, the lab key for root and the user.
    ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$H/ssh/ssh_host_ed25519_key"
    cp "$LAB_DIR/ssh/id_ed25519.pub" "$H/ssh/authorized_keys.root"
    cp "$LAB_DIR/ssh/id_ed25519.pub" "$H/ssh/authorized_keys.$user"
    cat >"$H/ssh/sshd_config" <<EOF
ListenAddress $ip
Port 22
HostKey $H/ssh/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile $H/ssh/authorized_keys.%u
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
MaxSessions 50
ClientAliveInterval 15
Subsystem sftp /usr/lib/openssh/sftp-server
AcceptEnv LANG LC_*
EOF

    # Network: veth into the bridge, address, default route via the gateway.
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$LAB_BRIDGE" up
    ip netns exec "$ns" ip addr add "$ip/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip route add default via "$LAB_GW"

    start_host "$i"
    write_known_hosts
    log "host $i up: ssh -i $LAB_DIR/ssh/id_ed25519 -o UserKnownHostsFile=$LAB_DIR/known_hosts root@$ip"
}

# The host recipe of docs/verified-execution.md, step by step, inside host i: a dedicated user,
# the shim at /opt/kpssh/kpssh-shim (root, 0755), /etc/kpssh/allowed_signers, a sudoers rule for
# exactly the shim with no arguments, authorized_keys restricted to the shim from the lab
# gateway, and the sshd Match block; sshd -t and visudo -c before sshd reloads.
cmd_verified() {
    local i=$1 shim='' signers='' vuser=kpssh
    shift
    while (($#)); do
        case $1 in
        --shim) shim=$2 ;;
        --allowed-signers) signers=$2 ;;
        --user) vuser=$2 ;;
        *) die "verified: unknown option $1" ;;
        esac
        shift 2
    done
    [[ -f $shim && -f $signers ]] || die "verified: --shim and --allowed-signers must name files"
    [[ $vuser =~ ^[a-z_][a-z0-9_-]*$ && $vuser != root ]] || die "verified: --user must be a plain non-root user name"
    # The lab has no syslog: the shim logs to a file of the host's own, which tests read at
    # <host>/fs/var-lib-kpssh/shim.log. sudoers names the same command line, options included.
    local H uid=$((5000 + i)) path="/opt/kpssh/kpssh-shim --log /var/lib/kpssh/shim.log"
    H=$(host_dir "$i")
    [[ -e $H/host.env ]] || die "host $i does not exist"
    # 1. the user (its shell runs ForceCommand; no password)
    if ! grep -q "^$vuser:" "$H/files/etc-passwd"; then
        printf '%s:x:%d:%d:kpssh verified execution:/home/%s:/bin/sh\n' "$vuser" "$uid" "$uid" "$vuser" >>"$H/files/etc-passwd"
        printf '%s:x:%d:\n' "$vuser" "$uid" >>"$H/files/etc-group"
        printf '%s:*:20000:0:99999:7:::\n' "$vuser" >>"$H/files/etc-shadow"
        mkdir -p "$H/fs/home/$vuser"
        chown "$uid:$uid" "$H/fs/home/$vuser"
    fi
    # 2. the shim, root-owned and not writable by anyone else (it refuses otherwise)
    mkdir -p "$H/fs/opt-kpssh"
    chmod 755 "$H/fs/opt-kpssh"
    install -o root -g root -m 0755 "$shim" "$H/fs/opt-kpssh/kpssh-shim"
    mkdir -p "$H/fs/var-lib-kpssh"
    # 3. the trust root
    install -o root -g root -m 0644 "$signers" "$H/fs/etc-kpssh/allowed_signers"
    # 4. sudo: exactly the shim's command line
    printf '%s ALL=(root) NOPASSWD: %s\n' "$vuser" "$path" >"$H/fs/etc-sudoers.d/kpssh"
    chmod 440 "$H/fs/etc-sudoers.d/kpssh"
    visudo -cq -f "$H/fs/etc-sudoers.d/kpssh" || die "verified: sudoers rule does not parse"
    # 5. the controller's key, usable for the shim only, from the gateway only
    printf 'restrict,from="%s",command="%s" %s\n' "$LAB_GW" "$path" \
        "$(<"$LAB_DIR/ssh/id_ed25519.pub")" >"$H/ssh/authorized_keys.$vuser"
    # 6. sshd: the Match block, checked before the reload
    if ! grep -q "^Match User $vuser\$" "$H/ssh/sshd_config"; then
        cat >>"$H/ssh/sshd_config" <<EOF

Match User $vuser
    ForceCommand $path
    PermitTTY no
    AllowTcpForwarding no
    AllowAgentForwarding no
    X11Forwarding no
    LogLevel VERBOSE
EOF
    fi
    # Inside the host: sshd -t wants the privilege separation directory, which only the host has.
    host_running "$i" || die "verified: host $i is not running"
    "$0" exec "$i" /usr/sbin/sshd -t -f "$H/ssh/sshd_config" || die "verified: sshd -t refuses the config"
    if host_running "$i"; then
        "$0" exec "$i" kill -HUP "$(<"$H/state/run/sshd.pid")"
        wait_for 20 "sshd on $(host_ip "$i")" bash -c "exec 3<>/dev/tcp/$(host_ip "$i")/22" ||
            die "sshd of host $i did not come back after the reload"
    fi
    log "host $i: verified execution for user $vuser (shim $path)"
}

start_host() {
    local i=$1 H ns ip
    H=$(host_dir "$i") ns=$(host_ns "$i") ip=$(host_ip "$i")
    host_running "$i" && die "host $i is already running"
    [[ -e /var/run/netns/$ns ]] || die "host $i has no network namespace (deleted?)"
    setsid ip netns exec "$ns" unshare --mount --uts --pid --fork --kill-child --mount-proc \
        --propagation private bash "$LAB_SCRIPT_DIR/hostinit.sh" "$H" \
        </dev/null >>"$H/logs/init.log" 2>&1 &
    echo $! >"$(host_pidfile "$i")"
    rm -f "$H/state/run/booted"
    wait_for 20 "host $i boot" test -e "$H/state/run/booted" ||
        die "host $i did not boot; see $H/logs/init.log"
    wait_for 20 "sshd on $ip" bash -c "exec 3<>/dev/tcp/$ip/22" ||
        die "sshd of host $i is not listening on $ip:22; see $H/logs/sshd.log"
}

# gone PID: the process no longer exists or is a zombie
gone() { [[ ! -e /proc/$1 || $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]; }

stop_host() {
    local i=$1 p ns
    p=$(host_init_pid "$i") || p=''
    if [[ -n $p ]]; then
        # SIGKILL to the host's PID 1 makes the kernel kill every process in
        # the host's PID namespace; unshare (its parent) then exits by itself.
        kill -KILL "$p" 2>/dev/null || true
        wait_for 10 "host $i PID 1 gone" gone "$p" || die "host $i PID 1 ($p) survived SIGKILL"
    fi
    # unshare ignores TERM while it waits; after its child died it exits.
    kill_pidfile "$(host_pidfile "$i")" 2
    ns=$(host_ns "$i")
    if [[ -e /var/run/netns/$ns ]]; then
        wait_for 10 "netns $ns empty" bash -c "[[ -z \$(ip netns pids $ns) ]]" ||
            die "processes left in $ns: $(ip netns pids "$ns" | tr '\n' ' ')"
    fi
}

need_host() {
    check_index "$1"
    [[ -e $(host_dir "$1")/host.env ]] || die "host $1 does not exist in lab $LAB_ID"
}

cmd_del() {
    local i=$1 H ns veth p
    H=$(host_dir "$i") ns=$(host_ns "$i") veth=$(host_veth "$i")
    [[ -e $H/host.env ]] && stop_host "$i"
    if [[ -e /var/run/netns/$ns ]]; then
        # leftovers of an earlier run whose records are gone: the namespace
        # name is ours, so are its processes
        for p in $(ip netns pids "$ns"); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns"
    fi
    ip link del "$veth" 2>/dev/null || true
    if [[ -d $H ]]; then
        mkdir -p "$LAB_DIR/logs/h$i"
        cp -a "$H/logs/." "$LAB_DIR/logs/h$i/" 2>/dev/null || true
        rm -rf "$H"
    fi
    write_known_hosts 2>/dev/null || true
}

cmd_list() {
    local h
    printf '%-4s %-10s %-14s %-8s %-4s %-8s %-8s %-8s %s\n' IDX NAME IP STATE CPU MEM_MIB ARCH USER KUBELET
    for h in "$LAB_DIR"/hosts/h*/host.env; do
        [[ -e $h ]] || continue
        (
            # shellcheck disable=SC1090
            . "$h"
            st=stopped
            host_running "$HOST_INDEX" && st=running
            if [[ $st == running ]] && [[ $(ip -o link show "$HOST_VETH" 2>/dev/null) == *"state DOWN"* ]]; then st="cut"; fi
            kl=-
            if [[ $st != stopped ]]; then
                kl=$("$0" exec "$HOST_INDEX" systemctl is-active kubelet 2>/dev/null) || true
            fi
            printf '%-4s %-10s %-14s %-8s %-4s %-8s %-8s %-8s %s\n' "$HOST_INDEX" "$HOST_NAME" "$HOST_IP" \
                "$st" "$HOST_CPU" "$HOST_MEM_MIB" "$HOST_ARCH" "$HOST_USER" "$kl"
        )
    done
}

[[ $# -ge 1 ]] || usage
verb=$1
shift
need_root
case $verb in
add)
    check_index "${1:-}"
    cmd_add "$@"
    ;;
start)
    need_host "${1:-}"
    start_host "$1"
    log "host $1 started"
    ;;
stop)
    need_host "${1:-}"
    stop_host "$1"
    log "host $1 stopped (all its processes killed)"
    ;;
reboot)
    need_host "${1:-}"
    stop_host "$1"
    start_host "$1"
    log "host $1 rebooted"
    ;;
cut)
    need_host "${1:-}"
    ip link set "$(host_veth "$1")" down
    log "host $1 cut off the network"
    ;;
heal)
    need_host "${1:-}"
    ip link set "$(host_veth "$1")" up
    log "host $1 back on the network"
    ;;
slow)
    need_host "${1:-}"
    # A token bucket on the bridge side of the host's veth shapes what is sent to the host.
    # Its queue (200 kB, about 50 s) is deep enough that nothing is dropped: TCP keeps sending
    # slowly instead of backing off, like a congested link.
    tc qdisc replace dev "$(host_veth "$1")" root tbf rate 32kbit burst 1600 limit 200000
    log "host $1 on a 32 kbit/s link"
    ;;
fast)
    need_host "${1:-}"
    tc qdisc del dev "$(host_veth "$1")" root 2>/dev/null || true
    log "host $1 link at full speed"
    ;;
verified)
    need_host "${1:-}"
    cmd_verified "$@"
    ;;
rekey)
    need_host "${1:-}"
    H=$(host_dir "$1")
    rm -f "$H/ssh/ssh_host_ed25519_key" "$H/ssh/ssh_host_ed25519_key.pub"
    ssh-keygen -q -t ed25519 -N '' -C "$(host_name "$1")" -f "$H/ssh/ssh_host_ed25519_key"
    if host_running "$1"; then
        # sshd re-executes itself on SIGHUP and loads the new key
        "$0" exec "$1" kill -HUP "$(<"$H/state/run/sshd.pid")"
        sleep 0.5
    fi
    log "host $1 has a new host key $H/ssh/ssh_host_ed25519_key.pub ($LAB_DIR/known_hosts still has the old one; run host.sh known-hosts to refresh it)"
    ;;
del)
    check_index "${1:-}"
    cmd_del "$1"
    log "host $1 deleted"
    ;;
del-all)
    for h in "$LAB_DIR"/hosts/h*; do
        if [[ -d $h ]]; then cmd_del "${h##*/h}"; fi
    done
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${LAB_NETNS_PREFIX}[0-9]*\$" || true); do
        cmd_del "${ns#"$LAB_NETNS_PREFIX"}"
    done
    ;;
exec)
    need_host "${1:-}"
    i=$1
    shift
    (($#)) || die "exec: no command"
    p=$(host_init_pid "$i") || die "host $i is not running"
    exec nsenter -t "$p" -m -u -n -p -- env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
    ;;
list) cmd_list ;;
known-hosts)
    write_known_hosts
    cat "$LAB_DIR/known_hosts"
    ;;
*) usage ;;
esac
