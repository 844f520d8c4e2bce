{ pct=$1; sub("%","",pct); kind=$2; sym=$3;
  if (kind=="[k]") {
    if (sym ~ /^pvm_irq_enable$/) c="k-irq-enable(PV)";
    else if (sym ~ /^(entry_|do_syscall|syscall_|__x64_sys|x64_sys|__do_sys|ep_|do_epoll|__fget|fdget|fput|__io_|io_|tctx_|exit_to_user|__sys_|sock_poll|__ep|ep_poll|restore_|rseq|__rseq|switch_fpu|fpregs|arch_exit|__pfx)/) c="k-entry+wait";
    else c="k-tcp+copy";
  } else {
    if (sym ~ /twinloop\/core\./) c="u-core";
    else if (sym ~ /twinloop\/backend/) c="u-backend";
    else if (sym ~ /^(runtime\.memmove|runtime\.memclr|indexbody|bytes\.|memeqbody|strconv\.|unicode)/) c="u-core";
    else if (sym ~ /^(internal\/runtime\/syscall|syscall\.|golang.org\/x\/sys|github.com\/pawelgaczynski)/) c="u-syscall-stub";
    else c="u-runtime";
  }
  s[c]+=pct; t+=pct }
END { for (c in s) printf "%s=%.1f ", c, s[c]*100/t; printf "\n" }
