section .data
    job dd 0
    msg_done    db "job finished", 0
    msg_failed  db "job failed", 0
    msg_timeout db "job timed out", 0
section .text
_start:
    call start_job
    mov [job], eax
    mov ecx, 5                    ; polls left
.poll:
    push dword [job]
    call job_status
    test eax, eax
    js .failed                    ; -1: failed
    jnz .done                     ; 1: done
    dec ecx
    jnz .poll
    push msg_timeout
    jmp .tell
.failed:
    push msg_failed
    jmp .tell
.done:
    push dword [job]
    call download
    push msg_done
.tell:
    call notify
    hlt
