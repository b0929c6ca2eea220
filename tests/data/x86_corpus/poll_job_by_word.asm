; start the export, wait until it is done (at most 10 polls), then download it
section .text
    call start_job
    pop r1
    mov result_id, r1
    mov attempts, 0
poll:
    push result_id
    call job_status
    cmp eax, "done"
    je finished
    inc attempts
    cmp attempts, 10
    jl poll
    hlt
finished:
    push result_id
    call download
